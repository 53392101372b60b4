"""`tokenfleet operator --time-scale K` (controller/timescale.py): the autoscaler on simulated
seconds, converted at the Prometheus border only."""

from __future__ import annotations

import pytest

from tokenfleet.autoscale.signals import Attainment, Boundary, Observation, SignalsQuery
from tokenfleet.autoscale.types import Signals
from tokenfleet.controller.timescale import ScaledSource, SimulatedClock

QUERY = SignalsQuery("vllm", "ns", "svc", 1.0, 0.1, 0.95, window_seconds=60.0)
EXACT = Attainment(0.9, Boundary("1.0", 1.0, "exact"), "vllm:time_to_first_token_seconds")


class Wall:
    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


class Inner:
    """Answers like PrometheusSource would at 10x: rates per wall second."""

    def __init__(self) -> None:
        self.calls: list[tuple[SignalsQuery, float]] = []

    async def signals(self, query: SignalsQuery, url: str, at: float) -> Observation:
        self.calls.append((query, at))
        signals = Signals(
            at=at,
            reporting_replicas=2,
            request_rate=20.0,
            goodput=18.0,
            ttft_quantile_seconds=0.4,
            ttft_attainment=0.9,
            running_per_replica=5.0,
            newest_sample_age_seconds=1.5,
        )
        return Observation(signals, EXACT, EXACT, goodput_upper=19.0)

    async def pod_load(self, query: SignalsQuery, url: str, at: float) -> dict[str, float]:
        self.calls.append((query, at))
        return {"p": 3.0}


def test_simulated_clock_runs_k_times_faster_from_the_wall_clock() -> None:
    wall = Wall(1000.0)
    clock = SimulatedClock(10, wall)
    assert clock() == 1000.0
    wall.now = 1003.0
    assert clock() == 1030.0
    assert clock.to_wall(1030.0) == 1003.0


def test_time_scale_must_be_positive() -> None:
    with pytest.raises(ValueError, match="--time-scale"):
        SimulatedClock(0)


async def test_scaled_source_converts_rates_ages_windows_and_times() -> None:
    wall = Wall(1000.0)
    clock = SimulatedClock(10, wall)
    wall.now = 1003.0
    inner = Inner()
    observed = await ScaledSource(inner, clock).signals(QUERY, "http://p", clock())
    ((query, at),) = inner.calls
    assert (query.window_seconds, at) == (6.0, 1003.0)  # wall window, wall evaluation time
    s = observed.signals
    assert (s.at, s.request_rate, s.goodput) == (1030.0, 2.0, 1.8)
    assert s.newest_sample_age_seconds == 15.0
    # Unit-free signals pass through untouched.
    assert (s.ttft_quantile_seconds, s.ttft_attainment, s.running_per_replica) == (0.4, 0.9, 5.0)
    assert observed.goodput_upper == 1.9


async def test_scaled_source_pod_load_is_evaluated_at_wall_time() -> None:
    wall = Wall(500.0)
    clock = SimulatedClock(4, wall)
    inner = Inner()
    assert await ScaledSource(inner, clock).pod_load(QUERY, "http://p", clock()) == {"p": 3.0}
    assert inner.calls[0][1] == 500.0
