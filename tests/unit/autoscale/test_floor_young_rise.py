"""A rise above the bursts the standing floor was sized for is capped at the floor until it
has outlasted a cold start plus the signals' window (autoscale/bursts.py, young): replicas
ordered for it before then are ready after it if it is one more burst; after that it is a
change of level, and the policy chases it."""

from __future__ import annotations

from dataclasses import replace

from tests.support.policy_helpers import first_history, fleet, run_sequence, spec
from tokenfleet.autoscale.bursts import BurstMemory

QUIET, HIGH = 1.0, 40.0  # req/s; HIGH is five times the bursts' 8 req/s
DECISION = 15.0  # seconds between decisions (run_sequence)
OUTLASTED = 120.0 + 60.0  # default cold start + the signals' window


def test_a_rise_above_the_bursts_waits_for_its_age_before_replicas_are_ordered() -> None:
    # Two bursts of 8 req/s held on 3 replicas shortly before: a standing floor of 3.
    memory = BurstMemory(bursts=((700.0, 8.0, 3, True), (900.0, 8.0, 3, True)))
    history = replace(first_history(), bursts=memory)
    quiet = [(QUIET, 0.1, 1.0)] * 4
    # The rise breaks the SLO (attainment 0.95, under two error budgets, short of panic).
    rise = [(HIGH, 0.1, 0.95)] * 20
    decisions = run_sequence(spec(), fleet(3), quiet + rise, history)
    rise_start = len(quiet)
    ages = [DECISION * i for i in range(len(rise))]  # the rise starts at its first decision
    during = list(zip(decisions[rise_start:], ages, strict=True))
    young = [d.desired for d, age in during if age <= OUTLASTED]
    older = [d.desired for d, age in during if age > OUTLASTED]
    assert young == [3] * len(young)
    assert any("standing floor 3" in d.reason for d in decisions[rise_start + 1 :])
    assert max(older) > 3
