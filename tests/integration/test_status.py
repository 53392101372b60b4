"""Status conditions: transition times move only when a condition's status flips. Pure."""

from __future__ import annotations

import pytest

from tokenfleet.controller.status import (
    Condition,
    Observed,
    build_status,
    merge_conditions,
    phase_of,
    transitions,
)

T0, T1 = "2026-01-01T00:00:00Z", "2026-01-01T00:05:00Z"


@pytest.mark.parametrize(
    ("old_status", "new_status", "expected_time"),
    [
        ("True", True, T0),  # unchanged status keeps its transition time
        ("False", True, T1),  # a flip moves it
        ("Unknown", None, T0),
        ("True", None, T1),
    ],
)
def test_transition_time_moves_only_on_status_change(
    old_status: str, new_status: bool | None, expected_time: str
) -> None:
    previous = [{"type": "Ready", "status": old_status, "lastTransitionTime": T0}]
    merged = merge_conditions(
        previous, [Condition("Ready", new_status, "Why", "msg")], generation=3, now=T1
    )
    assert merged[0]["lastTransitionTime"] == expected_time
    assert merged[0]["observedGeneration"] == 3


@pytest.mark.parametrize(
    ("observed", "phase"),
    [
        (Observed(1, degraded=Condition("Degraded", True, "PlanFailed", "no fit")), "Degraded"),
        (Observed(1, replicas=2, ready_replicas=2), "Ready"),
        (Observed(1, replicas=2, ready_replicas=1), "Progressing"),
        (Observed(1, replicas=0, ready_replicas=0), "Pending"),
    ],
)
def test_phase_follows_conditions(observed: Observed, phase: str) -> None:
    status = build_status({}, observed, now=T0)
    assert status["phase"] == phase == phase_of(status["conditions"])
    assert status["observedGeneration"] == 1


def test_degraded_status_keeps_other_conditions_and_reports_the_flip() -> None:
    previous = build_status({}, Observed(1, replicas=1, ready_replicas=1), now=T0)
    previous["conditions"].append({"type": "Autoscaling", "status": "True", "reason": "X"})
    degraded = build_status(
        previous, Observed(2, degraded=Condition("Degraded", True, "ApplyFailed", "422")), now=T1
    )
    types = {c["type"]: c for c in degraded["conditions"]}
    assert types["Autoscaling"]["status"] == "True"  # the autoscaler's condition is kept
    flipped = {c["type"] for c in transitions(previous["conditions"], degraded["conditions"])}
    assert flipped == {"Degraded", "Ready"}
