"""Issue 17: derived names across LLMServices. The LeaderWorkerSet `x-lws` of LLMService `x`
makes the LWS controller create a headless Service `x-lws`, the very name the LLMService
called `x-lws` gives its own Service. Whichever comes second is Degraded NameConflict naming
both LLMServices and the fix, and has nothing created (not even the objects whose names
were free); once the first is deleted, the second is reconciled."""

from __future__ import annotations

from tests.support.cluster_objects import (
    DEPLOYMENTS,
    LLMS_PATH,
    create,
    degraded_condition,
    example,
)
from tests.support.operator_harness import NAMESPACE, StartOperator, eventually
from tokenfleet.testing.kmock_cluster import LWS, Cluster

MULTI = "llama-3-1-405b"  # its LeaderWorkerSet: llama-3-1-405b-lws


def renamed(name: str) -> dict[str, object]:
    body = example("llama-3.1-8b-l4.yaml")
    body["metadata"]["name"] = name
    return body


def objects_of(cluster: Cluster, owner: str) -> list[str]:
    return [
        f"{key} {obj['metadata']['name']}"
        for key in (DEPLOYMENTS, "v1/services", "policy/v1/poddisruptionbudgets", LWS)
        for obj in cluster.items(key)
        if obj["metadata"].get("labels", {}).get("tokenfleet.dev/llmservice") == owner
    ]


async def test_the_second_llmservice_deriving_a_name_is_refused_whole(
    cluster: Cluster, start_operator: StartOperator
) -> None:
    cluster.install(LWS)
    await start_operator(recheck_seconds=1.0)
    await create(cluster, example("llama-3.1-405b-multinode.yaml"))
    await eventually(lambda: cluster.items(LWS), what="the LeaderWorkerSet")

    await create(cluster, renamed(f"{MULTI}-lws"))
    degraded = await degraded_condition(cluster, f"{MULTI}-lws")
    assert degraded["reason"] == "NameConflict"
    assert f"Service {NAMESPACE}/{MULTI}-lws" in degraded["message"]
    assert f"LLMService {MULTI}-lws and LLMService {MULTI}" in degraded["message"]
    assert "rename one of them" in degraded["message"]
    assert objects_of(cluster, f"{MULTI}-lws") == []  # nothing half-created

    response = await cluster.delete(f"{LLMS_PATH}/{MULTI}")
    assert response.status < 300
    await eventually(
        lambda: cluster.get(DEPLOYMENTS, NAMESPACE, f"{MULTI}-lws"),
        what="the second reconciled once the first is gone",
    )
