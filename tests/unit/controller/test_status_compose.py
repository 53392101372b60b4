"""Composing one writer's status onto another's, the merge patch, and the autoscaler's
records (condition, status.autoscaling, history after a restart). Pure."""

from __future__ import annotations

from typing import Any

import pytest

from tokenfleet.autoscale.history import iso, rebuild_history
from tokenfleet.autoscale.signals import Attainment, Boundary, Observation
from tokenfleet.autoscale.types import (
    CapacityEstimate,
    Decision,
    History,
    Recommendation,
    Signals,
)
from tokenfleet.controller import status as st
from tokenfleet.controller.autoscaler_status import autoscaling_condition, compose_autoscaler_status
from tokenfleet.controller.statuswrite import merge_patch

T0 = "2026-01-01T00:00:00Z"


@pytest.mark.parametrize(
    ("old", "new", "patch"),
    [
        ({}, {"a": 1}, {"a": 1}),
        ({"a": 1, "b": 2}, {"a": 1}, {"b": None}),  # a removed key is sent as null
        ({"a": {"x": 1, "y": 2}}, {"a": {"x": 1}}, {"a": {"y": None}}),  # nested
        ({"a": {"x": 1}}, {"a": {"x": 1}}, {}),  # nothing to write
        ({"c": [1, 2]}, {"c": [1]}, {"c": [1]}),  # lists replaced whole
        ({"a": {"x": 1}}, {"a": 5}, {"a": 5}),
    ],
)
def test_merge_patch(old: dict[str, Any], new: dict[str, Any], patch: dict[str, Any]) -> None:
    assert merge_patch(old, new) == patch


def autoscaler_owned() -> dict[str, Any]:
    return {
        "autoscaling": {"desiredReplicas": 3, "reason": "r"},
        "latestTtftMs": 420.0,
        "conditions": [
            {"type": "Autoscaling", "status": "True", "reason": "Active", "lastTransitionTime": T0}
        ],
    }


def test_reconciler_keeps_the_autoscalers_part_and_drops_what_no_longer_holds() -> None:
    previous = {
        **autoscaler_owned(),
        "endpoint": "http://x/v1",
        "plan": {"tensorParallelSize": 1},
        "replicas": 3,
        "selector": "a=b",
    }
    degraded = st.Observed(
        4,
        degraded=st.Condition("Degraded", True, "InvalidSpec", "bad"),
        autoscaling=st.Condition("Autoscaling", None, "AwaitingMetrics", "no decision yet"),
    )
    new = st.reconciler_status(previous, degraded, now=T0)
    assert "endpoint" not in new and "plan" not in new
    assert new["replicas"] == 3 and new["selector"] == "a=b"  # the workload still runs
    assert new["autoscaling"] == previous["autoscaling"] and new["latestTtftMs"] == 420.0
    auto = next(c for c in new["conditions"] if c["type"] == "Autoscaling")
    assert auto["reason"] == "Active"  # never reverted to AwaitingMetrics


@pytest.mark.parametrize(
    ("before", "seeded"),
    [(None, "AwaitingMetrics"), ("Disabled", "AwaitingMetrics"), ("Held", "Held")],
)
def test_reconciler_seeds_autoscaling_only_before_the_autoscaler_reports(
    before: str | None, seeded: str
) -> None:
    conditions = [] if before is None else [{"type": "Autoscaling", "status": "False",
                                             "reason": before}]  # fmt: skip
    observed = st.Observed(
        1, replicas=1, autoscaling=st.Condition("Autoscaling", None, "AwaitingMetrics", "")
    )
    new = st.reconciler_status({"conditions": conditions}, observed, now=T0)
    assert next(c for c in new["conditions"] if c["type"] == "Autoscaling")["reason"] == seeded


def decision(**kw: Any) -> Decision:
    base: dict[str, Any] = {
        "previous": 2,
        "desired": 3,
        "reason": "p95 TTFT 0.9 s above 0.5 s",
        "driver": "ttft",
        "history": History(capacity=CapacityEstimate(predicted=2.5, observed=1.75)),
    }
    return Decision(**{**base, **kw})


@pytest.mark.parametrize(
    ("kw", "expected"),
    [
        ({}, ("Autoscaling", True, "Active")),
        ({"limited": "max"}, ("Autoscaling", True, "LimitedAtMax")),
        ({"held": "PrometheusDown", "desired": 2}, ("Autoscaling", False, "Held")),
        ({"held": "PartialData", "desired": 2}, ("Autoscaling", False, "Held")),
        # The policy working as meant, not a data problem: still Active.
        ({"held": "Cooldown", "desired": 2}, ("Autoscaling", True, "Active")),
        ({"held": "ReplicasStarting", "desired": 2}, ("Autoscaling", True, "Active")),
    ],
)
def test_condition_from_decision(kw: dict[str, Any], expected: tuple[str, bool, str]) -> None:
    cond = autoscaling_condition(decision(**kw))
    assert (cond.type, cond.status, cond.reason) == expected
    if cond.reason == "Held":
        assert cond.message.startswith(kw["held"] + ": ")


def body(enabled: bool = True, **status: Any) -> dict[str, Any]:
    return {
        "metadata": {"generation": 7},
        "spec": {"autoscaling": {"enabled": enabled}},
        "status": status,
    }


def observation(ttft: float | None) -> Observation:
    nothing = Attainment(None, Boundary(None, None, "nodata"), None)
    signals = Signals(at=0, reporting_replicas=2, request_rate=3.0, ttft_quantile_seconds=ttft,
                      goodput=2.9, kv_usage=0.41)  # fmt: skip
    return Observation(signals, nothing, nothing)


def test_autoscaler_status_replaces_its_part_only() -> None:
    reconciler = {"endpoint": "http://x/v1", "readyReplicas": 2, "conditions": [
        {"type": "Ready", "status": "True", "reason": "ReplicasReady", "lastTransitionTime": T0}
    ]}  # fmt: skip
    new = compose_autoscaler_status(
        body(**reconciler, latestTtftMs=1.0), decision(), observation(0.812), now=1.8e9,
        scaled=True,
    )  # fmt: skip
    assert new is not None
    assert new["endpoint"] == "http://x/v1" and new["readyReplicas"] == 2
    auto = new["autoscaling"]
    assert auto["desiredReplicas"] == 3 and auto["driver"] == "ttft"
    assert auto["lastScaleTime"] == auto["lastDecisionTime"] == iso(1.8e9)
    assert auto["signals"] == {"ttftSeconds": 0.812, "goodput": 2.9, "requestRate": 3.0,
                               "kvUsage": 0.41, "reportingReplicas": 2}  # fmt: skip
    assert auto["capacity"] == {"predicted": 2.5, "observed": 1.75}
    assert new["latestTtftMs"] == 812.0
    types = {c["type"]: c for c in new["conditions"]}
    assert types["Ready"]["lastTransitionTime"] == T0
    assert types["Autoscaling"]["observedGeneration"] == 7

    # No TTFT now (zero load): the printer column's value goes, it does not linger.
    later = compose_autoscaler_status(
        body(**new), decision(desired=2), observation(None), now=1.9e9, scaled=False
    )
    assert later is not None and "latestTtftMs" not in later
    assert later["autoscaling"]["lastScaleTime"] == iso(1.8e9)  # kept: no scale this time


def test_autoscaler_writes_nothing_once_disabled_or_deleting() -> None:
    assert compose_autoscaler_status(body(False), decision(), None, now=0, scaled=False) is None
    deleting = body()
    deleting["metadata"]["deletionTimestamp"] = T0
    assert compose_autoscaler_status(deleting, decision(), None, now=0, scaled=False) is None


def test_history_rebuilt_from_status_after_a_restart() -> None:
    history = rebuild_history(
        {
            "desiredReplicas": 3,
            "lastDecisionTime": "2026-01-01T00:10:00Z",
            "lastScaleTime": "2026-01-01T00:05:00Z",
            "capacity": {"predicted": 9.9, "observed": 1.5},
        },
        predicted=2.0,
    )
    decided, scaled = 1767226200.0, 1767225900.0
    assert history.recommendations == (Recommendation(decided, 3),)
    assert history.last_scale_up_at == history.last_scale_down_at == scaled
    # The plan's current prediction wins; the learnt capacity survives the restart.
    assert history.capacity == CapacityEstimate(predicted=2.0, observed=1.5)
    assert rebuild_history({}, 2.0) == History(capacity=CapacityEstimate(predicted=2.0))


def test_the_slo_ceiling_in_status_and_its_condition() -> None:
    """The traffic keeps 99% out of reach: status.autoscaling.attainability says how far,
    SLOAttainable turns False with the cause, and the result still parses as an
    LLMService status (a condition type the API refused stalled the loop once)."""
    from tokenfleet.api.status import LLMServiceStatus
    from tokenfleet.autoscale.attainability import Ceiling

    limited = Ceiling(0.971, 5947, 0.966, 0.966 / 0.971, 0.2, 0.99, 500.0)
    new = compose_autoscaler_status(
        body(), decision(), observation(0.4), now=1.8e9, scaled=False, ceiling=limited
    )
    assert new is not None
    assert new["autoscaling"]["attainability"] == {
        "attainable": 0.971,
        "target": 0.966,
        "longestPromptTokens": 5947,
        "queueWaitBudgetSeconds": 0.2,
        "message": limited.message(),
    }
    cond = {c["type"]: c for c in new["conditions"]}["SLOAttainable"]
    assert (cond["status"], cond["reason"]) == ("False", "TrafficLimited")
    assert cond["message"].startswith("2.9% of requests have prompts longer than 5,947 tokens")
    assert "the SLO can reach at most 97.1% attainment" in cond["message"]
    LLMServiceStatus.model_validate(new)

    reachable = Ceiling(1.0, 5947, 0.99, 0.99, 0.3, 0.99, 500.0)
    again = compose_autoscaler_status(
        body(**new), decision(), observation(0.4), now=1.9e9, scaled=False, ceiling=reachable
    )
    assert again is not None
    cond = {c["type"]: c for c in again["conditions"]}["SLOAttainable"]
    assert (cond["status"], cond["reason"]) == ("True", "Reachable")
