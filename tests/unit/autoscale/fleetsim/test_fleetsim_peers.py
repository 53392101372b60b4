"""The peers of autoscale-sim as their projects configure them (fleetsim/peers.py): the HPA
law over several triggers, the behaviors they ship, and how the best threshold is chosen."""

from __future__ import annotations

import pytest

from tokenfleet.autoscale.fleetsim.peers import PEERS, best_of
from tokenfleet.autoscale.fleetsim.policies import FleetView
from tokenfleet.autoscale.types import FleetState, Signals


def view(now: float, desired: int, waiting: float, running: float) -> FleetView:
    signals = Signals(now, desired, waiting_per_replica=waiting, running_per_replica=running)
    return FleetView(now, FleetState(desired, desired, 1, 50), signals)


def test_llm_d_takes_the_larger_of_its_two_triggers() -> None:
    rule = PEERS["keda"].build((1.0, 16.0), 2, 1, 50)
    # queue 3 per replica on 2 replicas: 6 wanted; running 10 per replica: 2 (inside 16).
    assert rule.decide(view(0.0, 2, 3.0, 10.0)) == 4  # +100% per 15 s, no 4-pod floor
    rule = PEERS["keda"].build((1.0, 16.0), 2, 1, 50)
    # No queue; running 40 per replica on 2: ceil(80 / 16) = 5, capped at doubling.
    assert rule.decide(view(0.0, 2, 0.0, 40.0)) == 4


def test_the_hpa_default_behavior_adds_four_pods_at_once() -> None:
    rule = PEERS["kserve"].build((2.0,), 1, 1, 50)
    assert rule.decide(view(0.0, 1, 0.0, 10.0)) == 5  # wants 5: max(4 pods, 100%) allows it


def test_kserve_polls_as_keda_defaults_and_llm_d_as_its_guide() -> None:
    assert PEERS["kserve"].build((2.0,), 1, 1, 5).poll == 30.0
    assert PEERS["keda"].build((1.0, 16.0), 1, 1, 5).poll == 15.0


@pytest.mark.parametrize(
    ("points", "expected"),
    [
        # Two reach 99%: the cheaper one.
        ([((1.0,), 0.995, 6.0), ((2.0,), 0.991, 5.0), ((3.0,), 0.97, 3.0)], (2.0,)),
        # None reaches it: the most attainment.
        ([((1.0,), 0.985, 6.0), ((2.0,), 0.98, 5.0)], (1.0,)),
    ],
)
def test_the_best_threshold(
    points: list[tuple[tuple[float, ...], float, float]], expected: tuple[float, ...]
) -> None:
    assert best_of(points, 0.99) == expected


def test_every_peer_ships_its_documented_value_inside_or_beside_its_grid() -> None:
    for peer in PEERS.values():
        assert len(peer.documented) == len(peer.knobs)
        assert all(len(point) == len(peer.knobs) for point in peer.grid)
        assert peer.source
