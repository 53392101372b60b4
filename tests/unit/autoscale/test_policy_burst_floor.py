"""How the policy applies a standing burst floor (autoscale/policy.py, _burst_floor)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from tests.support.policy_helpers import first_history, fleet, signals, spec
from tokenfleet.autoscale.bursts import BurstMemory
from tokenfleet.autoscale.policy import decide

NOW = 2000.0


@pytest.mark.parametrize(
    ("rate", "recommended"),
    [
        # A rise under way, far past the bursts' 8 req/s: the 4 replicas are all busy even
        # at full utilisation (10 req/s each), and the floor of 1 must not take them away.
        (35.0, 4),
        # The load is back within the bursts' size: the floor releases what chased them.
        (5.0, 1),
    ],
)
def test_a_standing_floor_does_not_cut_replicas_the_load_keeps_busy(
    rate: float, recommended: int
) -> None:
    memory = BurstMemory(
        bursts=((NOW - 200, 8.0, 1, True), (NOW - 100, 8.0, 1, True)),  # held by 1 replica
        rising=(NOW - 30, rate, 4, True),
        last_at=NOW - 15,
    )
    history = replace(first_history(), bursts=memory)
    d = decide(spec(), fleet(4), signals(NOW, 4, rate), history, NOW)
    assert d.details["burstFloor"] == 1
    assert d.details["raw"] == recommended  # the windows and rate limits then apply to it
