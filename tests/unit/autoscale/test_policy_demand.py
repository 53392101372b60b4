"""The demand the autoscaler sees is the arriving load, not what a saturated fleet finishes:
- demand = finished req/s + the growth of the requests in flight, the endpoint picker's
  queue included (spec.routing), so a saturated replica is never read as the load;
- the trend that forecasts a cold start ahead reads finishes + the waiting queue's growth
  over the rate window, so it still rises while a saturated fleet's finish rate is flat."""

from __future__ import annotations

import pytest

from tests.support.policy_helpers import first_history, fleet, signals, spec
from tokenfleet.autoscale.policy import DEFAULTS, decide
from tokenfleet.autoscale.types import Decision, History

NOW = 1000.0


def test_the_pickers_queue_growth_is_demand() -> None:
    """Routing on: 2 replicas finish 20 req/s with nothing waiting in the engines, while 150
    requests piled up at the endpoint picker in 15 s: the load is 30 req/s."""
    h = History(capacity=first_history().capacity, last_in_flight=(NOW - 15, 40.0))
    sig = signals(
        NOW, 2, 20.0, 0.3, 1.0, running_per_replica=20.0, waiting_per_replica=0.0,
        picker_queued=150.0,
    )  # fmt: skip
    d = decide(spec(), fleet(2), sig, h, NOW)
    assert d.details["demand"] == pytest.approx(20.0 + 150.0 / 15)
    assert d.details["feedforward"] == 4  # 30 / (10 x 0.8)


def _saturated(steps: int, queue_growth: float) -> list[tuple[float, float]]:
    """(now, waiting per replica) of a fleet of 2 that finishes a flat 20 req/s while its
    queue grows by `queue_growth` requests per second."""
    return [(NOW + 15 * i, queue_growth * 15 * i / 2) for i in range(steps)]


def _run(points: list[tuple[float, float]], rate: float, **fleet_kw: int) -> list[Decision]:
    history, out = first_history(), []
    for now, waiting in points:
        sig = signals(now, 2, rate, 0.3, 1.0, running_per_replica=10.0, waiting_per_replica=waiting)
        d = decide(spec(maxReplicas=40), fleet(2, **fleet_kw), sig, history, now)
        history = d.history
        out.append(d)
    return out


def test_a_saturated_fleets_rising_queue_is_forecast() -> None:
    """The finish rate is flat at 20 req/s, the queue grows faster and faster (arrivals
    20 -> 38 req/s over 3 minutes): the forecast sees the rise the finish rate hides."""
    history, decisions = first_history(), []
    waiting = 0.0
    for i in range(13):
        now = NOW + 15 * i
        waiting += (1.5 * i) * 15 / 2  # per replica: arrivals exceed finishes by 1.5 i req/s
        sig = signals(now, 2, 20.0, 0.3, 1.0, running_per_replica=10.0, waiting_per_replica=waiting)
        d = decide(spec(maxReplicas=40), fleet(2), sig, history, now)
        history = d.history
        decisions.append(d)
    last = decisions[-1].details
    assert last["demand"] > 20.0 + 1.5 * 11  # the queue's growth is in the demand
    assert last["forecast"] > last["demand"] + 0.5 * 0.1 * DEFAULTS.forecast_seconds


def test_a_flat_overload_has_no_trend() -> None:
    """A steady overload (arrivals 30, finishes 20 req/s): demand 30, nothing to forecast."""
    decisions = _run(_saturated(13, 10.0), 20.0)
    assert decisions[-1].details["demand"] == pytest.approx(30.0)
    assert "forecast" not in decisions[-1].details
