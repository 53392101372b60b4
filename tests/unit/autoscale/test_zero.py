"""Scale from and to zero (autoscale/zero.py through policy.decide), as tables.

minReplicas 0 needs spec.routing, so every spec here routes. The fleet's min_replicas is 0
only when the operator lets it be (Routing True); 1 otherwise.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from tests.support.policy_helpers import first_history, fleet, signals, spec
from tokenfleet.api.spec import LLMServiceSpec
from tokenfleet.autoscale.policy import decide
from tokenfleet.autoscale.types import Decision, FleetState, History

AFTER = 600  # scaleToZeroAfterSeconds' default


def zspec(**autoscaling: Any) -> LLMServiceSpec:
    return spec(routing=True, **{"minReplicas": 0, "maxReplicas": 8, **autoscaling})


def idle(at: float, reporting: int = 1, queued: float | None = 0.0) -> Any:
    """No request anywhere: rate 0, nothing running or waiting, the picker's queue as given."""
    return signals(
        at, reporting, 0.0, None, None,
        running_per_replica=0.0, waiting_per_replica=0.0, picker_queued=queued,
    )  # fmt: skip


@pytest.mark.parametrize(
    ("queued", "reporting", "desired", "driver", "held"),
    [
        (3.0, 0, 1, "queue", None),  # requests wait at the picker: one replica, this tick
        (1.0, 0, 1, "queue", None),
        (0.0, 0, 0, "zero", None),  # nothing waits: stay at zero
        (None, 0, 0, "hold", "NoData"),  # the picker reports nothing: hold, never guess
    ],
)
def test_from_zero(
    queued: float | None, reporting: int, desired: int, driver: str, held: str | None
) -> None:
    d = decide(zspec(), fleet(0, lo=0, hi=8), idle(1000, reporting, queued), first_history(), 1000)
    assert (d.desired, d.driver, d.held) == (desired, driver, held)
    if desired:
        assert "scale from zero" in d.reason and "wait at the endpoint picker" in d.reason


def test_from_zero_ignores_the_stabilization_windows() -> None:
    """Even right after a scale-down (cooldown) and with a long up window, one tick."""
    the_spec = zspec(scaleUpStabilizationSeconds=600)
    history = replace(first_history(), last_scale_down_at=990.0, last_scale_up_at=995.0)
    d = decide(the_spec, fleet(0, lo=0), idle(1000, 0, 2.0), history, 1000)
    assert d.desired == 1


def test_prometheus_down_at_zero_holds() -> None:
    d = decide(zspec(), fleet(0, lo=0), None, first_history(), 1000)
    assert (d.desired, d.held) == (0, "PrometheusDown")


def run_idle(
    start: FleetState, ticks: int, queued: float | None = 0.0, period: float = 30.0,
    busy_until: float = 0.0, history: History | None = None,
) -> list[Decision]:  # fmt: skip
    """Decide every `period` s from t=1000 on an idle fleet (traffic until busy_until)."""
    history = history or first_history()
    current, out = start, []
    for i in range(ticks):
        now = 1000.0 + i * period
        obs = idle(now, current.ready, queued)
        if now < busy_until:
            obs = replace(obs, request_rate=1.0, running_per_replica=1.0)
        d = decide(zspec(), current, obs, history, now)
        out.append(d)
        history = d.history
        current = replace(current, desired=d.desired, ready=d.desired)
    return out


def first_zero(decisions: list[Decision]) -> float | None:
    return next((1000.0 + i * 30.0 for i, d in enumerate(decisions) if d.desired == 0), None)


@pytest.mark.parametrize(
    ("case", "start", "queued", "busy_until", "zero_at"),
    [
        # Idle from the first tick: zero once the whole window passed without traffic.
        ("idle", fleet(1, lo=0), 0.0, 0.0, 1000.0 + AFTER),
        # Traffic before t=1300: the clock starts at the last busy tick (1270).
        ("busy then idle", fleet(1, lo=0), 0.0, 1300.0, 1270.0 + AFTER),
        # A request queued at the picker is traffic: never to zero.
        ("queued", fleet(1, lo=0), 2.0, 0.0, None),
        # The picker's queue unseen: the last replica stays.
        ("picker silent", fleet(1, lo=0), None, 0.0, None),
        # Routing not active (the operator passes min 1): never to zero.
        ("min 1", fleet(1, lo=1), 0.0, 0.0, None),
    ],
)
def test_to_zero(
    case: str, start: FleetState, queued: float | None, busy_until: float, zero_at: float | None
) -> None:
    decisions = run_idle(start, 40, queued=queued, busy_until=busy_until)
    assert first_zero(decisions) == zero_at, case
    if zero_at is not None:
        d = next(d for d in decisions if d.desired == 0)
        assert d.driver == "zero" and "scale to zero" in d.reason
        assert all(d.desired == 0 for d in decisions[decisions.index(d) :])  # and stays


def test_to_zero_honours_scale_to_zero_after_seconds() -> None:
    history = first_history()
    current = fleet(1, lo=0)
    the_spec = zspec(scaleToZeroAfterSeconds=120)
    desired = []
    for i in range(8):
        now = 1000.0 + i * 30.0
        d = decide(the_spec, current, idle(now), history, now)
        history, current = d.history, replace(current, desired=d.desired, ready=d.desired)
        desired.append(d.desired)
    assert desired == [1, 1, 1, 1, 0, 0, 0, 0]  # 1120 is the first tick 120 s idle


def test_never_to_zero_while_requests_run_or_wait() -> None:
    history = replace(first_history(), last_traffic_at=0.0)  # idle for ages before
    for busy in ({"running_per_replica": 0.5}, {"waiting_per_replica": 1.0}):
        obs = replace(idle(5000), **busy)
        d = decide(zspec(), fleet(1, lo=0), obs, history, 5000)
        assert d.desired == 1, busy


def test_the_policy_itself_scales_down_to_one_not_zero() -> None:
    """From 3 idle replicas: down to 1 by the policy, then 0 only after the idle window."""
    decisions = run_idle(fleet(3, lo=0), 60)
    counts = [d.desired for d in decisions]
    assert counts[0] == 3 and 1 in counts and counts[-1] == 0
    assert counts.index(0) > counts.index(1)
    assert all(d.driver != "zero" for d in decisions if d.desired > 0)


def test_cold_start_is_measured_from_zero_to_the_first_ready_replica() -> None:
    history = first_history()
    d = decide(zspec(), fleet(0, lo=0), idle(1000, 0, 3.0), history, 1000)
    assert d.desired == 1
    history = d.history
    for now, ready in ((1030, 0), (1060, 0), (1090, 0), (1120, 1)):
        obs = idle(now, ready, 3.0 if not ready else 0.0)
        d = decide(zspec(), fleet(1, ready=ready, lo=0), obs, history, now)
        history = d.history
    assert history.cold_start_seconds == 120.0 and history.cold_since is None
    # The next scale-from-zero says what a first request will wait.
    later = decide(zspec(), fleet(0, lo=0), idle(9000, 0, 1.0), history, 9000)
    assert "the last cold start took 120s" in later.reason
