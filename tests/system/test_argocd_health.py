"""examples/gitops/llmservice-health.lua in a real Lua interpreter (lupa), on status
documents built by the operator's own status code (controller.status.build_status)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import lupa
import pytest

from tokenfleet.controller.status import Condition, Observed, build_status

SCRIPT = Path(__file__).resolve().parents[2] / "examples" / "gitops" / "llmservice-health.lua"
PLANNED = Condition("Planned", True, "Planned", "TP 1 on l4")


def health(body: dict[str, Any]) -> dict[str, str]:
    lua = lupa.LuaRuntime(unpack_returned_tuples=True)
    lua.globals().obj = lua.table_from(body, recursive=True)
    result = lua.execute(SCRIPT.read_text())
    return {"status": result["status"], "message": result["message"]}


def llms(observed: Observed | None, generation: int = 1) -> dict[str, Any]:
    body: dict[str, Any] = {"metadata": {"name": "chat", "generation": generation}}
    if observed is not None:
        body["status"] = build_status({}, observed, now="2026-01-01T00:00:00Z")
    return body


def autoscaling(status: bool | None, reason: str, message: str = "") -> Condition:
    return Condition("Autoscaling", status, reason, message)


CASES = [
    ("no status yet", llms(None), "Progressing", "Waiting for the tokenfleet operator"),
    (
        "old generation",
        llms(Observed(generation=1, planned=PLANNED, replicas=1, ready_replicas=1), generation=2),
        "Progressing",
        "generation 2",
    ),
    (
        "degraded",
        llms(Observed(generation=1, degraded=Condition("Degraded", True, "PlanFailed", "no fit"))),
        "Degraded",
        "PlanFailed: no fit",
    ),
    (
        "rolling out",
        llms(Observed(generation=1, planned=PLANNED, replicas=2, ready_replicas=1)),
        "Progressing",
        "1/2 replicas ready",
    ),
    (
        "ready",
        llms(Observed(generation=1, planned=PLANNED, replicas=2, ready_replicas=2)),
        "Healthy",
        "2/2 ready",
    ),
    (
        "scaled to zero",
        llms(Observed(generation=1, planned=PLANNED, replicas=0, ready_replicas=0)),
        "Suspended",
        "zero",
    ),
    (
        "ready, autoscaler active",
        llms(Observed(generation=1, replicas=2, ready_replicas=2,
                      autoscaling=autoscaling(True, "Active", "ttft"))),
        "Healthy",
        "2/2 ready",
    ),
    (
        "ready, awaiting metrics",
        llms(Observed(generation=1, replicas=1, ready_replicas=1,
                      autoscaling=autoscaling(None, "AwaitingMetrics"))),
        "Healthy",
        "1/1 ready",
    ),
    (
        "ready, autoscaling disabled",
        llms(Observed(generation=1, replicas=1, ready_replicas=1,
                      autoscaling=autoscaling(False, "Disabled"))),
        "Healthy",
        "1/1 ready",
    ),
    (
        "ready, at max",
        llms(Observed(generation=1, replicas=4, ready_replicas=4,
                      autoscaling=autoscaling(True, "LimitedAtMax", "wants 6"))),
        "Healthy",
        "autoscaling LimitedAtMax: wants 6",
    ),
    (
        "ready, held",
        llms(Observed(generation=1, replicas=2, ready_replicas=2,
                      autoscaling=autoscaling(False, "Held", "PrometheusDown: refused"))),
        "Healthy",
        "autoscaling Held: PrometheusDown",
    ),
]  # fmt: skip


@pytest.mark.parametrize(("case", "body", "status", "needle"), CASES, ids=[c[0] for c in CASES])
def test_health(case: str, body: dict[str, Any], status: str, needle: str) -> None:
    got = health(body)
    assert got["status"] == status, got
    assert needle in got["message"], got


def test_every_argo_health_status_is_reachable() -> None:
    assert {c[2] for c in CASES} == {"Healthy", "Progressing", "Degraded", "Suspended"}
