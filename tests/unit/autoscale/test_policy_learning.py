"""Capacity that learns: the SLO broke at r req/s per replica -> capacity <= r; it held at
r -> capacity >= r; bounded per decision and overall, only on a settled fleet."""

from __future__ import annotations

from dataclasses import replace

import pytest
from policy_helpers import CAPACITY, first_history, fleet, signals, spec

from tokenfleet.autoscale.policy import DEFAULTS, decide
from tokenfleet.autoscale.types import CapacityEstimate, History

NOW = 1000.0


def settled(observed: float | None = None, ready: int = 4) -> History:
    """A fleet whose ready count has not changed for longer than the settle time."""
    return History(
        capacity=CapacityEstimate(predicted=CAPACITY, observed=observed),
        last_ready=ready,
        ready_changed_at=NOW - DEFAULTS.learn_settle_seconds - 1,
    )


@pytest.mark.parametrize(
    ("name", "rate", "ttft", "attainment", "observed"),
    [
        # broke at 9 req/s per replica (< 10 believed): capacity <= 9
        ("broke below belief", 36.0, 0.8, 0.95, 9.0),
        # broke at 7 per replica: one window may only take x0.8 off
        ("broke far below: bounded", 28.0, 0.8, 0.95, 8.0),
        # broke above belief: consistent, nothing learnt
        ("broke above belief", 48.0, 0.8, 0.95, None),
        # held at 11 per replica (> 10 believed): capacity >= 11
        ("held above belief", 44.0, 0.3, 1.0, 11.0),
        # held at 20 per replica: at most x1.25 per decision
        ("held far above: bounded", 80.0, 0.3, 1.0, 12.5),
        # held comfortably near the target utilisation: probe 5% up
        ("comfortable at target", 32.0, 0.1, 1.0, 10.5),
        # held, not comfortable (TTFT near the SLO): no evidence of headroom
        ("held, near the SLO", 32.0, 0.45, 1.0, None),
        # idle fleet: meets any SLO, proves nothing
        ("idle", 4.0, 0.05, 1.0, None),
    ],
)
def test_learning_rule(
    name: str, rate: float, ttft: float, attainment: float, observed: float | None
) -> None:
    d = decide(spec(), fleet(4), signals(NOW, 4, rate, ttft, attainment), settled(), NOW)
    capacity = d.history.capacity
    assert capacity is not None and capacity.predicted == CAPACITY, name
    assert (
        capacity.observed == pytest.approx(observed) if observed else capacity.observed is None
    ), name


def test_the_bound_case_is_really_bounded() -> None:
    """Broke at 2 req/s per replica: capacity <= 2, but one window moves it x0.8 at most."""
    d = decide(spec(), fleet(4), signals(NOW, 4, 8.0, 0.8, 0.9), settled(), NOW)
    assert d.history.capacity == CapacityEstimate(predicted=CAPACITY, observed=8.0)


@pytest.mark.parametrize(
    ("name", "history", "current"),
    [
        ("ready count just changed", replace(settled(), ready_changed_at=NOW - 10), fleet(4)),
        ("ready count differs from last time", settled(ready=3), fleet(4)),
        ("replicas starting", settled(), fleet(5, ready=4)),
    ],
)
def test_no_learning_on_an_unsettled_fleet(name: str, history: History, current: object) -> None:
    d = decide(spec(), current, signals(NOW, 4, 36.0, 0.8, 0.95), history, NOW)  # type: ignore[arg-type]
    assert d.history.capacity is not None and d.history.capacity.observed is None, name


def test_learning_stays_within_bounds_of_the_prediction() -> None:
    """A hundred windows saying 'broke at almost nothing' or 'held at 100x' end at 0.25x / 4x."""
    low, high = settled(), settled()
    for step in range(100):
        now = NOW + step * 15
        low = decide(
            spec(),
            fleet(4),
            signals(now, 4, 0.4, 0.8, 0.5),
            replace(low, ready_changed_at=0.0),
            now,
        ).history
        high = decide(
            spec(),
            fleet(4),
            signals(now, 4, 4000.0, 0.1, 1.0),
            replace(high, ready_changed_at=0.0),
            now,
        ).history
    assert low.capacity is not None and high.capacity is not None
    assert low.capacity.observed == pytest.approx(CAPACITY * 0.25)
    assert high.capacity.observed == pytest.approx(CAPACITY * 4)


def test_one_noisy_window_moves_capacity_at_most_20_percent() -> None:
    history = settled(observed=10.0)
    d = decide(spec(), fleet(4), signals(NOW, 4, 4.0, 5.0, 0.1), history, NOW)
    assert d.history.capacity is not None and d.history.capacity.observed == pytest.approx(8.0)


def test_learnt_capacity_drives_the_feed_forward() -> None:
    """Model 2x optimistic: it broke at 8 req/s per replica; the next estimates use less."""
    history = settled()
    rates = []
    for step in range(6):
        now = NOW + step * 15
        d = decide(
            spec(),
            fleet(4),
            signals(now, 4, 32.0, 0.8, 0.9),
            replace(history, ready_changed_at=0.0),
            now,
        )
        history = d.history
        rates.append(d.details["capacity"])
    assert rates == [8.0] * 6  # capacity <= 8 is what the evidence says, no more
    assert d.details["feedforward"] > 4


def test_first_history_starts_from_the_prediction() -> None:
    d = decide(spec(), fleet(2), signals(NOW, 2, 10.0), first_history(), NOW)
    assert d.history.capacity == CapacityEstimate(predicted=CAPACITY)
