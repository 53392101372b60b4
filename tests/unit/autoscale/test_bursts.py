"""autoscale/bursts.py, table-style: what counts as a burst, when the floor stands, its size."""

from __future__ import annotations

import pytest

from tokenfleet.autoscale.bursts import BurstMemory, floor, observe
from tokenfleet.autoscale.bursts import young as bursts_young

SPAN = 300.0  # scale-down window 180 s + cold start 120 s
LAG = 60.0


def _feed(loads: list[float], ready: int = 2, slo_met: bool = True) -> BurstMemory:
    """One decision per 15 s at these demands, 4 req/s per replica at targetUtilization."""
    return _observe_all([(demand, slo_met, 0.0) for demand in loads], ready)


def _step(
    memory: BurstMemory,
    now: float,
    ready: int,
    demand: float,
    up: bool,
    slo_met: bool = True,
    missed: float = 0.0,
) -> BurstMemory:
    """One decision at 4 req/s per replica at targetUtilization, a 120 s cold start."""
    return observe(
        memory,
        now=now,
        ready=ready,
        demand=demand,
        per_replica=4.0,
        slo_met=slo_met,
        scaled_up=up,
        span=SPAN,
        lag=LAG,
        default_cold_start=120.0,
        missed=missed,
    )


def _observe_all(steps: list[tuple[float, bool, float]], ready: int) -> BurstMemory:
    """One decision per 15 s at each (demand, SLO met, missed share)."""
    memory = BurstMemory()
    for i, (demand, slo_met, missed) in enumerate(steps):
        memory = _step(memory, 15.0 * i, ready, demand, False, slo_met, missed)
    return memory


QUIET = [0.3] * 6
SHORT = [8.0] * 4  # 60 s above the quiet load's replicas: over within cold start + window
LONG = [8.0] * 14  # 210 s: a replica ordered for it would have served it


@pytest.mark.parametrize(
    ("loads", "bursts"),
    [
        (QUIET + SHORT + QUIET, 1),
        (QUIET + LONG + QUIET, 0),  # a ramp, not a burst: chasing it pays
        (QUIET + [3.9] * 4 + QUIET, 0),  # within the quiet load's one replica: no rise
        (QUIET + SHORT + QUIET + SHORT + QUIET, 2),
        (QUIET + SHORT, 0),  # still under way
    ],
)
def test_a_burst_is_a_rise_over_within_a_cold_start(loads: list[float], bursts: int) -> None:
    assert len(_feed(loads).bursts) == bursts


# The demand read every 30 s on a slow ramp at a fraction of a request per second (0.24 to
# 1.5 req/s, one replica serving 0.64 at targetUtilization): a minute's count of a few
# tenths of a request per second doubles and halves by chance.
NOISY_RAMP = [0.05, 0.22, 0.17, 0.25, 0.27, 0.17, 0.48, 0.38, 0.48, 0.67, 0.18, 0.82, 0.58]
NOISY_RAMP += [0.78, 0.93, 0.9, 0.9, 1.5, 0.52, 1.07, 1.15, 1.12, 1.53, 1.73, 1.48]


@pytest.mark.parametrize(("scale", "counted"), [(1.0, False), (30.0, True)])
def test_a_rise_must_stand_out_of_the_rates_counting_noise(scale: float, counted: bool) -> None:
    """At the ramp's own rates its swings are counting noise: no recurring bursts, no
    floor to cap the ramp. The same swings at 30x the load (30x the counts, the noise only
    sqrt(30)x) are real rises over within a cold start: recurring bursts."""
    memory = BurstMemory()
    for i, demand in enumerate(NOISY_RAMP):
        memory = observe(
            memory,
            now=30.0 * i,
            ready=1 if i < 12 else 2,
            demand=demand * scale,
            per_replica=0.64 * scale,
            slo_met=True,
            scaled_up=False,
            span=SPAN,
            lag=LAG,
            default_cold_start=120.0,
        )
    assert (len(memory.bursts) >= 2) is counted
    now = 30.0 * len(NOISY_RAMP)
    assert (floor(memory, 0.8 * scale, now, SPAN) is not None) is counted


@pytest.mark.parametrize(
    ("loads", "now_after", "replicas"),
    [
        (QUIET + SHORT + QUIET, 0.0, None),  # one burst is an accident
        (QUIET + SHORT + QUIET + SHORT + QUIET, 0.0, 2),  # 8 req/s at 5 req/s per replica
        (QUIET + SHORT + QUIET + SHORT + QUIET, 2 * SPAN, None),  # lapsed: no burst since
        (QUIET + SHORT + QUIET * 5 + SHORT + QUIET, 0.0, None),  # 300+ s apart: not recurring
    ],
)
def test_the_floor_stands_for_recurring_bursts(
    loads: list[float], now_after: float, replicas: int | None
) -> None:
    memory = _feed(loads)
    now = 15.0 * (len(loads) - 1) + now_after
    standing = floor(memory, 5.0, now, SPAN)
    assert (standing.replicas if standing else None) == replicas
    if standing is not None:
        assert "recurring bursts shorter than a cold start" in standing.reason()


def test_the_floor_is_sized_from_what_held_or_broke_the_bursts() -> None:
    """The windowed demand (8 req/s) asks for 1 replica at 10 req/s each. Bursts absorbed
    by 3 ready replicas within the SLO keep 3: fewer were never shown to hold them. Bursts
    that broke the SLO on 3 ready replicas prove 3 too few: the floor is 4, not the 1 the
    capacity learnt in the troughs asks for."""
    loads = QUIET + SHORT + QUIET + SHORT + QUIET
    held = _feed(loads, ready=3)
    assert floor(held, 10.0, 15.0 * len(loads), SPAN).replicas == 3  # type: ignore[union-attr]
    missed = _feed(loads, ready=3, slo_met=False)
    assert floor(missed, 10.0, 15.0 * len(loads), SPAN).replicas == 4  # type: ignore[union-attr]


def test_a_burst_that_broke_on_fewer_replicas_does_not_raise_what_held_one() -> None:
    """Broke on 1 replica, then held on 2: 2 is proven enough."""
    memory = BurstMemory(bursts=((100.0, 8.0, 1, False), (250.0, 8.0, 2, True)))
    assert floor(memory, 10.0, 300.0, SPAN).replicas == 2  # type: ignore[union-attr]


def test_bursts_from_nothing_count() -> None:
    """Bursts out of idle gaps (quiet load 0): one replica serving the trickle is the quiet
    fleet, so only load past it is a rise, and a burst over within a cold start counts."""
    idle = [0.0] * 6
    assert len(_feed(idle + SHORT + idle + SHORT + idle).bursts) == 2
    assert len(_feed(idle + [3.9] * 4 + idle).bursts) == 0  # one replica serves it


@pytest.mark.parametrize(
    ("demand_when_ready", "late"),
    [
        (1.0, True),  # the burst it was ordered for is over: the one replica holds the load
        (3.5, False),  # the load has not halved since the order (6 -> 3.5): no burst ended
        (6.0, False),  # the load is still there: the replica came in time
    ],
)
def test_a_scale_up_is_timed_and_judged_at_its_first_ready_replica(
    demand_when_ready: float, late: bool
) -> None:
    memory = _step(BurstMemory(), 0.0, 1, 6.0, up=True)
    memory = _step(memory, 90.0, 1, 6.0, up=False)
    memory = _step(memory, 195.0, 2, demand_when_ready, up=False)
    assert memory.cold_start == 195.0 and memory.ordered is None
    assert (len(memory.bursts) == 1) is late


@pytest.mark.parametrize(("now", "replicas"), [(1100.0, 2), (1000.0 + 2 * SPAN + 1, None)])
def test_bursts_the_floor_absorbs_keep_it_standing(now: float, replicas: int | None) -> None:
    """Two bursts within a span start the pattern; later ones up to two spans apart keep it
    (an absorbed burst may not fall back to the quiet load before the next one); two spans
    without one end it."""
    bursts = ((0.0, 8.0, 2, True), (200.0, 8.0, 2, True), (600.0, 8.0, 2, True))
    memory = BurstMemory(bursts=(*bursts, (1000.0, 8.0, 2, True)))
    standing = floor(memory, 10.0, now, SPAN)
    assert (standing.replicas if standing else None) == replicas


def _feed_missed(steps: list[tuple[float, float]], ready: int = 1) -> BurstMemory:
    """One decision per 15 s at (demand, missed share); the SLO broke where misses > 0.05."""
    return _observe_all([(demand, missed <= 0.05, missed) for demand, missed in steps], ready)


CALM = [(0.5, 0.0)] * 20  # 300 s of 0.5 req/s: 150 requests
SPIKE = [(3.0, 0.3)] * 4  # 3 req/s, 30% missed: 54 misses; one replica's feed-forward load


@pytest.mark.parametrize(
    ("steps", "replicas"),
    [
        (CALM + SPIKE + CALM, None),  # one breach is an accident
        # Two breaches the feed-forward never asked a replica for (3 req/s at 4 per
        # replica): 54 misses against 1% of the ~330 requests between them. One replica
        # misses the SLO over that stretch: one more stands.
        (CALM + SPIKE + CALM + SPIKE + CALM, 2),
        (CALM + SPIKE + CALM * 8 + SPIKE + CALM, 2),  # 2,400 s apart: still within budget
        # 6% missed (11 misses a breach) is within 1% of the ~1,400 requests between them.
        (CALM + [(3.0, 0.06)] * 4 + CALM * 8 + [(3.0, 0.06)] * 4 + CALM, None),
    ],
)
def test_breaches_recur_when_their_misses_exceed_the_error_budget_between_them(
    steps: list[tuple[float, float]], replicas: int | None
) -> None:
    memory = _feed_missed(steps)
    standing = floor(memory, 5.0, 15.0 * len(steps), SPAN, budget=0.01)
    assert (standing.replicas if standing else None) == replicas
    if standing is not None:
        assert "broke the SLO on 1 replica(s) recurring within the error budget" in (
            standing.reason()
        )


@pytest.mark.parametrize(("served_since", "replicas"), [(5000.0, 2), (5500.0, None)])
def test_the_budget_floor_stands_while_the_last_breach_outspends_the_budget_since(
    served_since: float, replicas: int | None
) -> None:
    """54 misses are 1% of 5,400 requests: after that many without a breach, one replica
    would keep the SLO over the stretch even if the spike came back."""
    breaks = ((1000.0, 54.0, 1, 3.0), (1330.0, 54.0, 1, 3.0))
    memory = BurstMemory(breaks=breaks, served=1330.0 + served_since)
    standing = floor(memory, 5.0, 0.0, SPAN, budget=0.01)
    assert (standing.replicas if standing else None) == replicas


def test_the_budget_floor_is_one_more_than_the_fleets_the_breaches_broke() -> None:
    breaks = ((1000.0, 54.0, 3, 9.0), (1330.0, 54.0, 2, 9.0))
    standing = floor(BurstMemory(breaks=breaks, served=1400.0), 5.0, 0.0, SPAN, budget=0.01)
    assert standing is not None and standing.replicas == 4


@pytest.mark.parametrize(
    ("loads", "young"),
    [
        (QUIET, False),  # no rise under way
        (QUIET + SHORT, True),  # 60 s into it at the next decision: it may still be a burst
        (QUIET + [8.0] * 12, True),  # 180 s: cold start + window, the last moment
        (QUIET + LONG, False),  # 210 s: a change of level
    ],
)
def test_a_rise_is_young_until_it_outlasts_a_cold_start_and_the_window(
    loads: list[float], young: bool
) -> None:
    now = 15.0 * len(loads)  # the decision after the last observed one
    assert bursts_young(_feed(loads), now, 120.0, LAG) is young
