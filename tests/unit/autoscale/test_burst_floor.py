"""Bursts shorter than a cold start (burst_trace.py, seeded): a replica ordered for a burst is
ready after it, so chasing the bursts pays for replicas that serve nothing and still misses
them. With the standing floor of autoscale/bursts.py the policy costs at most 1.2x the
cheapest fixed fleet that reaches its attainment (without it: 1.34-1.35x on these seeds)."""

from __future__ import annotations

import pytest

from tests.support.burst_trace import burst_trace
from tokenfleet.autoscale.fleetsim.policies import Static, Tokenfleet
from tokenfleet.autoscale.fleetsim.run import SimOptions, prepare, run_policy

pytestmark = pytest.mark.slow  # a whole-trace replay: the unit-slow tier


@pytest.mark.parametrize("seed", [15, 16])
def test_recurring_short_bursts_cost_no_more_than_a_fixed_fleet(seed: int) -> None:
    setup = prepare(burst_trace(seed, duration=3600.0), SimOptions())
    ours = Tokenfleet(setup.spec, setup.predicted_capacity, setup.static_replicas)
    result = run_policy(setup, ours)
    cheapest = next(
        run
        for run in (run_policy(setup, Static(n)) for n in range(1, setup.max_replicas + 1))
        if run.attainment >= result.attainment
    )
    assert result.gpu_hours <= 1.2 * cheapest.gpu_hours, (result.gpu_hours, cheapest.gpu_hours)
    floors = [d for d in ours.decisions if d.driver == "bursts"]
    assert floors, "the floor never stood"
    assert "for recurring bursts shorter than a cold start" in floors[-1].reason
