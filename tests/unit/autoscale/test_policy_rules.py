"""policy.decide, rule by rule: holds, feed-forward, SLO target tracking, bounds, steps, panic."""

from __future__ import annotations

import itertools

import pytest

from tests.support.policy_helpers import first_history, fleet, run_sequence, signals, spec
from tokenfleet.autoscale.policy import DEFAULTS, decide
from tokenfleet.autoscale.types import History, Recommendation

DOWN_WINDOW = spec().autoscaling.scale_down_stabilization_seconds

NOW = 1000.0


# -- holds: never scale down (or up) on data that cannot be trusted ------------------------------
@pytest.mark.parametrize(
    ("name", "sig", "ready", "reason"),
    [
        ("prometheus down", None, 4, "PrometheusDown"),
        ("nobody reports", signals(NOW, 0, 0.0), 4, "NoData"),
        ("no load series", signals(NOW, 4, None, ttft=None), 4, "NoData"),
        (
            "stale sample",
            signals(NOW, 4, 0.0, age=DEFAULTS.stale_after_seconds + 1),
            4,
            "StaleData",
        ),
        ("old evaluation", signals(NOW - 120, 4, 0.0), 4, "StaleData"),
        ("one pod silent", signals(NOW, 3, 0.0), 4, "PartialData"),
        # The three that report carry 10 req/s each within the SLO: nothing to act on.
        ("one pod silent, in the SLO", signals(NOW, 3, 30.0, ttft=0.3), 4, "PartialData"),
    ],
)
def test_untrusted_data_holds(name: str, sig: object, ready: int, reason: str) -> None:
    d = decide(spec(), fleet(4, ready), sig, first_history(), NOW)  # type: ignore[arg-type]
    assert d.held == reason, name
    assert d.desired == 4 and d.direction == "none" and d.driver == "hold"
    assert d.reason.startswith(reason)


def test_hold_still_honours_the_bounds() -> None:
    d = decide(spec(maxReplicas=3), fleet(5, hi=3), None, first_history(), NOW)
    assert (d.held, d.desired, d.limited) == ("PrometheusDown", 3, "max")


def test_zero_load_nan_latency_is_not_a_hold_and_scales_down_to_min() -> None:
    """0/0 at zero load makes TTFT and attainment None; with every replica reporting a rate
    of 0 that must still scale down (the HPA-on-NaN complaint)."""
    decisions = run_sequence(spec(minReplicas=2), fleet(6, lo=2), [(0.0, None, None)] * 80)
    assert all(d.held in (None, "Stabilizing", "Cooldown") for d in decisions)
    sizes = [d.desired for d in decisions]
    assert sizes[-1] == 2
    assert all(b <= a for a, b in zip([6, *sizes], sizes, strict=False))  # never up
    first_down = next(i for i, d in enumerate(decisions) if d.direction == "down")
    assert first_down * 15 >= DOWN_WINDOW  # only after the stabilization window


def test_after_a_hold_a_scale_down_waits_a_whole_window_of_trusted_data() -> None:
    """Prometheus back after an outage: the empty window must not read as 'no load'."""
    d = decide(spec(), fleet(6), None, first_history(), NOW)
    sizes = []
    history = d.history
    for step in range(1, 30):
        now = NOW + step * 15
        d = decide(spec(), fleet(d.desired), signals(now, d.desired, 0.0, None, None), history, now)
        history = d.history
        sizes.append((now - NOW, d.desired))
    first_down = next(t for t, n in sizes if n < 6)
    assert first_down >= 15 + DOWN_WINDOW


# -- the feed-forward estimate and SLO target tracking -------------------------------------------
@pytest.mark.parametrize(
    ("desired", "rate", "ttft", "attainment", "waiting", "expected", "driver"),
    [
        # rate / (10 req/s x 0.8): 40 -> 5 replicas; x2 step from 4
        (4, 40.0, 0.1, 1.0, 0.0, 5, "feedforward"),
        # step limit: from 2, at most max(2, 100%) = +2
        (2, 80.0, 0.1, 1.0, 0.0, 4, "feedforward"),
        # from 8 the 100% rule allows +8
        (8, 150.0, 0.1, 1.0, 0.0, 16, "feedforward"),
        # TTFT 1.5x the SLO on 4 ready -> ceil(4 x 1.5) = 6, though the rate fits 4
        (4, 20.0, 0.75, 1.0, 0.0, 6, "ttft"),
        # within HPA's 10% tolerance: nothing to do
        (4, 32.0, 0.54, 1.0, 0.0, 4, "feedforward"),
        # attainment under target -> at least one more
        (4, 20.0, 0.3, 0.97, 0.0, 5, "attainment"),
        # queueing (llm-d: >= 5 waiting per replica) -> (running + waiting) / running
        (4, 20.0, 0.3, 1.0, 10.0, 8, "queue"),
    ],
)
def test_recommendation(
    desired: int,
    rate: float,
    ttft: float,
    attainment: float,
    waiting: float,
    expected: int,
    driver: str,
) -> None:
    sig = signals(
        NOW, desired, rate, ttft, attainment, waiting_per_replica=waiting, running_per_replica=10.0
    )
    d = decide(spec(), fleet(desired), sig, first_history(), NOW)
    assert (d.desired, d.held) == (expected, None)
    if expected != desired:
        assert d.driver == driver
    assert d.details["feedforward"] == -(-rate // 8)


def test_goodput_metric_names_its_driver() -> None:
    d = decide(spec(metric="goodput"), fleet(2), signals(NOW, 2, 30.0), first_history(), NOW)
    assert (d.desired, d.driver) == (4, "goodput")


def test_no_capacity_estimate_means_no_feed_forward() -> None:
    d = decide(spec(), fleet(3), signals(NOW, 3, 500.0), History(), NOW)
    assert d.desired == 3 and d.details["feedforward"] == 0


# -- bounds -------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("desired", "rate", "lo", "hi", "expected", "limited"),
    [
        (4, 400.0, 1, 6, 6, "max"),  # wants 50, capped at 6 (and the step allows 8)
        (6, 400.0, 1, 6, 6, "max"),  # already at max: stays, still reported as limited
        (3, 0.0, 3, 10, 3, "min"),  # wants 0, floor 3
        (1, 0.0, 3, 10, 3, None),  # below min after a spec edit: raised at once
        (12, 200.0, 1, 10, 10, None),  # above max after a spec edit: lowered at once
    ],
)
def test_bounds(
    desired: int, rate: float, lo: int, hi: int, expected: int, limited: str | None
) -> None:
    the_spec = spec(minReplicas=lo, maxReplicas=hi)
    d = decide(
        the_spec, fleet(desired, lo=lo, hi=hi), signals(NOW, desired, rate), first_history(), NOW
    )
    assert d.desired == expected
    if limited:
        assert d.limited == limited


def test_limited_at_max_says_what_it_wanted() -> None:
    d = decide(spec(maxReplicas=6), fleet(6, hi=6), signals(NOW, 6, 400.0), first_history(), NOW)
    assert d.limited == "max" and "wants 50" in d.reason


# -- up fast, down slow ---------------------------------------------------------------------------
def test_scale_up_uses_the_lowest_recommendation_of_the_short_window() -> None:
    """A one-decision blip asks for more only when the whole up window asked for more."""
    h = History(
        capacity=first_history().capacity,
        recommendations=(Recommendation(NOW - 30, 3), Recommendation(NOW - 15, 3)),
    )
    d = decide(spec(), fleet(3), signals(NOW, 3, 60.0), h, NOW)
    assert d.desired == 3 and d.direction == "none"
    # 60 s later the window holds only recommendations of 8: up by max(2, 100% of 3) = 3.
    later = decide(spec(), fleet(3), signals(NOW + 60, 3, 60.0), d.history, NOW + 60)
    assert (later.desired, later.driver) == (6, "feedforward")


def test_scale_down_waits_for_the_window_then_steps_with_a_cooldown() -> None:
    decisions = run_sequence(spec(), fleet(8), [(80.0, 0.1, 1.0)] * 4 + [(8.0, 0.1, 1.0)] * 60)
    sizes = [d.desired for d in decisions]
    downs = [i for i, d in enumerate(decisions) if d.direction == "down"]
    assert sizes[-1] == 1
    # the last high recommendation leaves the window first
    assert (downs[0] - 3) * 15 >= DOWN_WINDOW
    gaps = [b - a for a, b in itertools.pairwise(downs)]
    assert all(g * 15 >= DEFAULTS.scale_down_cooldown_seconds for g in gaps)
    # maxScaleDownStep (1) or half the replicas, whichever is more (AIBrix: down /2)
    assert all(
        1 <= decisions[i].previous - decisions[i].desired <= max(1, decisions[i].previous // 2)
        for i in downs
    )
    held = {d.held for d in decisions if d.direction == "none" and d.desired > 1}
    assert held <= {None, "Stabilizing", "Cooldown"}


def test_flapping_load_does_not_oscillate() -> None:
    """Load alternating every decision between 2 and 6 replicas' worth: one scale-up, no
    scale-down while the high samples stay in the window, never an up-down-up."""
    flapping = [(48.0 if i % 2 else 16.0, 0.1, 1.0) for i in range(80)]
    decisions = run_sequence(spec(scaleUpStabilizationSeconds=0), fleet(2), flapping)
    directions = {d.direction for d in decisions if d.direction != "none"}
    assert directions == {"up"}  # 2 -> 4 -> 6 (step limit), never down
    assert decisions[-1].desired == 6


def test_flapping_around_the_threshold_with_an_up_window() -> None:
    flapping = [(48.0 if i % 2 else 16.0, 0.1, 1.0) for i in range(80)]
    decisions = run_sequence(spec(), fleet(2), flapping)
    assert [d.direction for d in decisions if d.direction != "none"] == []


# -- replicas starting: no cascade -------------------------------------------------------------
def test_no_new_scale_up_while_replicas_start() -> None:
    # The load wants 5 at the target utilisation, but the 4 asked for (2 still starting)
    # serve it at full utilisation: wait for them.
    d = decide(spec(), fleet(4, ready=2), signals(NOW, 2, 38.0, 0.7), first_history(), NOW)
    assert (d.desired, d.held) == (4, "ReplicasStarting")


def test_load_beyond_what_is_starting_still_scales_up() -> None:
    # 60 req/s needs 6 even at full utilisation: more than the 4 asked for.
    d = decide(spec(), fleet(4, ready=2), signals(NOW, 2, 60.0, 0.3), first_history(), NOW)
    assert (d.desired, d.held, d.driver) == (8, None, "feedforward")


def test_repeated_breaches_while_starting_do_not_cascade() -> None:
    """TTFT stays high during a two-minute cold start; every decision sees it. The replicas
    asked for the first time are not asked for again."""
    history = first_history()
    current = fleet(2)
    asked = []
    for step in range(10):  # 150 s of a 3x breach, nothing becomes ready
        now = NOW + step * 15
        d = decide(spec(), current, signals(now, 2, 20.0, 1.5, 0.5), history, now)
        history = d.history
        current = fleet(d.desired, ready=2)
        asked.append(d.desired)
    assert asked[0] == 4 and set(asked) == {4}  # x2 of the 2 ready, once


def test_panic_jumps_past_the_step_limit_and_past_starting_replicas() -> None:
    # 2 ready, 2 starting, TTFT 3x, 80 req/s: the feed-forward asks for 10; the step limit
    # (max(2, 100%) = +4) would stop at 8, panic goes straight there.
    d = decide(spec(), fleet(4, ready=2), signals(NOW, 2, 80.0, 1.5), first_history(), NOW)
    assert d.panic and d.desired == 10 and d.driver == "feedforward"
    assert d.history.panic_until == NOW + DEFAULTS.panic_hold_seconds


def test_panic_does_not_cascade_past_starting_replicas_that_cover_the_load() -> None:
    """3 ready + 1 starting, TTFT 3x from a backlog, 20 req/s (2 replicas' worth at full
    utilisation): the TTFT asks x2 of the ready (6), but the replicas already ordered cover
    the load; the backlog, not missing capacity, is what TTFT shows. Wait for them."""
    d = decide(spec(), fleet(4, ready=3), signals(NOW, 3, 20.0, 1.5), first_history(), NOW)
    assert d.panic and d.desired == 4 and d.held == "ReplicasStarting"
    # the same breach with the load outgrowing even the starting replicas: jump
    d = decide(spec(), fleet(4, ready=3), signals(NOW, 3, 60.0, 1.5), first_history(), NOW)
    assert d.panic and d.desired == 8 and d.held is None


def test_panic_on_attainment_far_below_target() -> None:
    d = decide(spec(), fleet(2), signals(NOW, 2, 10.0, 0.4, 0.5), first_history(), NOW)
    assert d.panic and d.desired == 4 and d.driver == "attainment"  # 0.99 / 0.5 -> 2x


def test_no_scale_down_while_panicking() -> None:
    d = decide(spec(), fleet(2), signals(NOW, 2, 10.0, 1.5), first_history(), NOW)
    assert d.panic and d.desired == 4  # TTFT 3x: x2 of the ready replicas
    calm = fleet(d.desired)
    history = d.history
    # Load gone, recommendations in the window cleared: still no scale-down inside panic.
    history = History(capacity=history.capacity, panic_until=history.panic_until)
    d2 = decide(
        spec(scaleDownStabilizationSeconds=0), calm, signals(NOW + 30, 4, 0.0), history, NOW + 30
    )
    assert d2.desired == 4 and d2.panic
    d3 = decide(
        spec(scaleDownStabilizationSeconds=0), calm, signals(NOW + 75, 4, 0.0), d2.history, NOW + 75
    )
    assert d3.desired == 2 and not d3.panic  # halved (AIBrix: down /2)


def test_no_scale_down_while_the_slo_is_not_met() -> None:
    """Load says 3 replicas, but the SLO is missed now (attainment 0.985): keep them."""
    h = History(capacity=first_history().capacity, trusted_since=NOW - 600)
    d = decide(
        spec(scaleDownStabilizationSeconds=0), fleet(6), signals(NOW, 6, 20.0, 0.3, 0.985), h, NOW
    )
    assert (d.desired, d.held) == (6, "Stabilizing") and "SLO is not met" in d.reason


def test_a_rising_load_is_forecast_one_cold_start_ahead() -> None:
    """A steady ramp of 0.1 req/s per second: the feed-forward sizes for the load 120 s on,
    less the rate's counting noise (the trend is a lower confidence bound)."""
    ramp = [(20.0 + 1.5 * i, 0.1, 1.0) for i in range(13)]  # +1.5 req/s every 15 s
    decisions = run_sequence(spec(maxReplicas=40), fleet(8), ramp)
    last = decisions[-1].details
    rise = last["forecast"] - last["demand"]
    assert 0.7 * 0.1 * DEFAULTS.forecast_seconds < rise < 0.1 * DEFAULTS.forecast_seconds
    assert last["feedforward"] == -(-last["forecast"] // 8)


@pytest.mark.parametrize(
    ("rates", "forecast"),
    [
        # Poisson-sized wobble at 0.26 req/s (sd over a 1-minute window: 0.066 req/s): noise.
        ([0.22, 0.2, 0.24, 0.21, 0.26, 0.3, 0.28, 0.3, 0.31, 0.3, 0.29, 0.32, 0.3], False),
        # The same shape at 100x the load is a real rise, far beyond counting noise.
        ([22.0, 20.0, 24.0, 21.0, 26.0, 30.0, 28.0, 30.0, 31.0, 30.0, 29.0, 32.0, 30.0], True),
    ],
)
def test_a_trend_must_rise_above_the_rates_counting_noise(
    rates: list[float], forecast: bool
) -> None:
    seq = [(r, 0.1, 1.0) for r in rates]
    decisions = run_sequence(spec(maxReplicas=100), fleet(40), seq)
    assert ("forecast" in decisions[-1].details) is forecast


def test_demand_counts_the_requests_that_queue() -> None:
    """A saturated fleet finishes 20 req/s while 150 more requests pile up in 15 s: the
    load is 30 req/s, and the feed-forward sizes for that."""
    h = History(capacity=first_history().capacity, last_in_flight=(NOW - 15, 100.0))
    sig = signals(NOW, 2, 20.0, 0.3, 1.0, running_per_replica=100.0, waiting_per_replica=25.0)
    d = decide(spec(), fleet(2), sig, h, NOW)
    assert d.details["demand"] == pytest.approx(20.0 + (250.0 - 100.0) / 15)
    assert d.details["feedforward"] == 4
