"""Issue 8: the operator harms nothing it does not own, and no LLMService can stall it.

The real operator (kopf.operator in-process) against the kmock apiserver; each test shows
one numbered item of the issue. States are polled for, never timed.
"""

from __future__ import annotations

from typing import Any

from kmock_cluster import Cluster
from operator_harness import NAMESPACE, StartOperator, eventually
from test_operator import (
    LLMS_PATH,
    SERVICES,
    condition,
    create,
    example,
    llms,
    owned,
)

NAME = "llama-3-1-8b"


def degraded(cluster: Cluster, name: str) -> dict[str, Any]:
    cond = condition(cluster, name, "Degraded")
    return cond if cond.get("status") == "True" else {}


async def wait_degraded(cluster: Cluster, name: str, reason: str | None = None) -> dict[str, Any]:
    def check() -> Any:
        cond = degraded(cluster, name)
        return cond if cond and (reason is None or cond["reason"] == reason) else False

    return dict(await eventually(check, what=f"{name} Degraded {reason or ''}"))


def foreign_service(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": name, "namespace": NAMESPACE, "labels": {"app": "billing"}},
        "spec": {"selector": {"app": "billing"}, "ports": [{"port": 443, "targetPort": 6443}]},
    }


# --- 1. no takeover -----------------------------------------------------------------------


async def test_a_namesake_is_never_taken_over(
    cluster: Cluster, start_operator: StartOperator
) -> None:
    await create(cluster, foreign_service(NAME), f"/api/v1/namespaces/{NAMESPACE}/services")
    before = cluster.get(SERVICES, NAMESPACE, NAME)
    await start_operator()
    await create(cluster, example("llama-3.1-8b-l4.yaml"))

    cond = await wait_degraded(cluster, NAME, "NameConflict")
    assert f"Service {NAMESPACE}/{NAME} already exists" in cond["message"]
    assert "metadata.name" in cond["message"]  # how to resolve it
    assert cluster.get(SERVICES, NAMESPACE, NAME) == before  # not a field changed
    assert owned(cluster) == []  # nothing else written either (no PVC, no Deployment)

    # Deleting the LLMService must not garbage-collect the namesake.
    response = await cluster.delete(f"{LLMS_PATH}/{NAME}")
    assert response.status < 300
    await eventually(lambda: not llms(cluster, NAME), what="the LLMService gone")
    assert cluster.get(SERVICES, NAMESPACE, NAME) == before
