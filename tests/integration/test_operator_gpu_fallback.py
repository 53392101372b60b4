"""spec.gpu.type auto against the real operator and the emulated API: the chosen type's
engine pods stay Unschedulable -> new replicas on the runner-up type (its own Deployment,
planned for it), with an Event and the GpuFallback condition; no flapping when the Pending
clears and reappears; back to the preferred type once its replicas schedule again; nothing
of anyone else touched.

kmock runs no scheduler, ReplicaSet or kubelet: the test plays them, creating the engine
pods each Deployment asks for with the PodScheduled / Ready conditions a cluster would show.
"""

from __future__ import annotations

import datetime
from typing import Any

import jsonschema

from tests.support.cluster_objects import (
    DEPLOYMENTS,
    crd_status_schema,
    create,
    engine_args,
    events,
    llms,
)
from tests.support.operator_harness import NAMESPACE, StartOperator, eventually
from tokenfleet.testing.kmock_cluster import Cluster

NAME = "chat"
PODS = f"/api/v1/namespaces/{NAMESPACE}/pods"
NO_ROOM = "0/4 nodes are available: 4 Insufficient nvidia.com/gpu."


def service(dwell: int) -> dict[str, Any]:
    return {
        "apiVersion": "tokenfleet.dev/v1alpha1",
        "kind": "LLMService",
        "metadata": {"name": NAME, "namespace": NAMESPACE},
        "spec": {
            "model": {"id": "meta-llama/Llama-3.1-8B"},
            "gpu": {
                "type": "auto",
                "candidates": [{"type": "h100-sxm"}, {"type": "l40s"}],
                "fallback": {"unschedulableSeconds": 300, "dwellSeconds": dwell},
            },
            "workload": {"maxModelLen": 8192},
            "slo": {"ttftMs": 2000, "tpotMs": 100},
            "replicas": 3,
        },
    }


def stamp(seconds_ago: float) -> str:
    at = datetime.datetime.now(datetime.UTC) - datetime.timedelta(seconds=seconds_ago)
    return at.strftime("%Y-%m-%dT%H:%M:%SZ")


def pod(name: str, gpu: str, *, node: str | None, ready: bool = False, since: float = 0) -> Any:
    labels = {"tokenfleet.dev/llmservice": NAME, "tokenfleet.dev/gpu-type": gpu,
              "tokenfleet.dev/role": "server"}  # fmt: skip
    if node:
        conditions = [{"type": "PodScheduled", "status": "True"},
                      {"type": "Ready", "status": "True" if ready else "False"}]  # fmt: skip
    else:
        conditions = [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                       "message": NO_ROOM, "lastTransitionTime": stamp(since)}]  # fmt: skip
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": labels},
        "spec": {"nodeName": node} if node else {},
        "status": {"conditions": conditions},
    }


async def set_pod(cluster: Cluster, body: dict[str, Any]) -> None:
    name = body["metadata"]["name"]
    if cluster.get("v1/pods", NAMESPACE, name) is not None:
        response = await cluster.delete(f"{PODS}/{name}")
        assert response.status < 300, await response.text()
    await create(cluster, body, PODS)


async def drop_pod(cluster: Cluster, name: str) -> None:
    response = await cluster.delete(f"{PODS}/{name}")
    assert response.status < 300, await response.text()


def replicas(cluster: Cluster, gpu: str) -> int | None:
    d = cluster.get(DEPLOYMENTS, NAMESPACE, f"{NAME}-{gpu}")
    return None if d is None else int(d["spec"]["replicas"])


def gpu_condition(cluster: Cluster) -> dict[str, Any]:
    conds = llms(cluster, NAME).get("status", {}).get("conditions", [])
    return next((c for c in conds if c["type"] == "GpuFallback"), {})


def reasons(cluster: Cluster) -> list[str]:
    return [str(e.get("reason")) for e in events(cluster)]


def placement(cluster: Cluster) -> dict[str, dict[str, Any]]:
    rows = llms(cluster, NAME).get("status", {}).get("gpu", {}).get("placement", [])
    return {row["type"]: row for row in rows}


async def foreign(cluster: Cluster) -> dict[str, str]:
    """Objects of someone else: a Deployment and pods, one of another LLMService."""
    await create(
        cluster,
        {"apiVersion": "apps/v1", "kind": "Deployment",
         "metadata": {"name": "web", "labels": {"app": "web"}},
         "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "web"}},
                  "template": {"metadata": {"labels": {"app": "web"}},
                               "spec": {"containers": [{"name": "c", "image": "nginx"}]}}}},
        f"/apis/apps/v1/namespaces/{NAMESPACE}/deployments",
    )  # fmt: skip
    other = pod("other-0", "h100-sxm", node=None, since=3600)
    other["metadata"]["labels"]["tokenfleet.dev/llmservice"] = "other"
    await create(cluster, other, PODS)
    web = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "web-0", "labels": {"app": "web"}},
    }
    await create(cluster, web, PODS)
    return versions(cluster)


def versions(cluster: Cluster) -> dict[str, str]:
    names = [("apps/v1/deployments", "web"), ("v1/pods", "other-0"), ("v1/pods", "web-0")]
    return {n: cluster.get(k, NAMESPACE, n)["metadata"]["resourceVersion"] for k, n in names}  # type: ignore[index]


async def test_unschedulable_chosen_type_moves_new_replicas_to_the_runner_up_without_flapping(
    cluster: Cluster, start_operator: StartOperator
) -> None:
    before = await foreign(cluster)
    operator = await start_operator(resync_seconds=0.3)
    await create(cluster, service(dwell=86_400))
    await eventually(lambda: replicas(cluster, "h100-sxm") == 3, what="3 replicas on h100-sxm")
    gpu = await eventually(lambda: llms(cluster, NAME)["status"]["gpu"], what="status.gpu")
    assert (gpu["chosen"], gpu["runnerUp"]) == ("h100-sxm", "l40s")
    costs = {c["type"]: c["costPerMillionGoodRequests"] for c in gpu["candidates"]}
    assert costs["h100-sxm"] < costs["l40s"] and "runner-up l40s" in gpu["reason"]
    cond = await eventually(lambda: gpu_condition(cluster), what="GpuFallback condition")
    assert (cond["status"], cond["reason"]) == ("False", "OnPreferredType")

    # Two H100 replicas schedule; the third stays Unschedulable past the 300 s deadline.
    await set_pod(cluster, pod("h-0", "h100-sxm", node="n1", ready=True))
    await set_pod(cluster, pod("h-1", "h100-sxm", node="n2", ready=True))
    await set_pod(cluster, pod("h-2", "h100-sxm", node=None, since=400))
    await eventually(lambda: replicas(cluster, "l40s") == 1, what="a replica on l40s")
    assert replicas(cluster, "h100-sxm") == 2  # the two serving replicas stay
    cond = await eventually(
        lambda: (c := gpu_condition(cluster))["status"] == "True" and c, what="GpuFallback True"
    )
    assert cond["reason"] == "PreferredUnavailable"
    assert "new replicas go to l40s" in cond["message"] and NO_ROOM in cond["message"]
    await eventually(lambda: "GpuUnavailable" in reasons(cluster), what="GpuUnavailable Event")
    event = next(e for e in events(cluster) if e.get("reason") == "GpuUnavailable")
    assert event["type"] == "Warning" and "h100-sxm" in event["message"]
    # The runner-up's replicas are planned for it and select its nodes.
    l40s = cluster.get(DEPLOYMENTS, NAMESPACE, f"{NAME}-l40s")
    assert l40s is not None
    pod_spec = l40s["spec"]["template"]["spec"]
    assert pod_spec["nodeSelector"] == {"nvidia.com/gpu.product": "NVIDIA-L40S"}
    assert engine_args(l40s)[engine_args(l40s).index("--tensor-parallel-size") + 1] == "1"
    # One pool: the Service selects every type's pods.
    svc = cluster.get("v1/services", NAMESPACE, NAME)
    assert svc is not None and svc["spec"]["selector"]["tokenfleet.dev/llmservice"] == NAME
    assert "tokenfleet.dev/gpu-type" not in svc["spec"]["selector"]

    # The ReplicaSet removes the pending pod; then the Pending clears (an H100 frees up, a
    # pod schedules) and reappears (a fresh Unschedulable pod): within the dwell, no move.
    await drop_pod(cluster, "h-2")
    await set_pod(cluster, pod("l-0", "l40s", node="n3", ready=True))
    await set_pod(cluster, pod("h-3", "h100-sxm", node="n4", ready=True))
    await eventually(lambda: placement(cluster)["h100-sxm"]["ready"] == 3, what="3 ready h100")
    await set_pod(cluster, pod("h-4", "h100-sxm", node=None, since=1))
    await eventually(
        lambda: (
            placement(cluster)["h100-sxm"]["ready"] == 3
            and llms(cluster, NAME)["status"]["gpu"]["growth"] == "l40s"
        ),
        what="a pass that saw them",
    )
    done = operator.metrics.reconciles.labels("applied")
    seen_at = done._value.get()
    await eventually(lambda: done._value.get() >= seen_at + 3, what="three more passes")
    assert (replicas(cluster, "h100-sxm"), replicas(cluster, "l40s")) == (2, 1)
    assert reasons(cluster).count("GpuUnavailable") == 1 and "GpuAvailable" not in reasons(cluster)
    assert gpu_condition(cluster)["reason"] == "PreferredUnavailable"
    jsonschema.validate(llms(cluster, NAME)["status"], crd_status_schema())  # status.gpu too

    # Nothing of anyone else was written.
    assert versions(cluster) == before
    assert not [p for m, p in cluster.writes if "/web" in p or "/other-0" in p]


async def test_back_on_the_preferred_type_once_its_replicas_schedule_again(
    cluster: Cluster, start_operator: StartOperator
) -> None:
    await start_operator(resync_seconds=0.3)
    await create(cluster, service(dwell=1))
    await eventually(lambda: replicas(cluster, "h100-sxm") == 3, what="3 replicas on h100-sxm")
    await set_pod(cluster, pod("h-0", "h100-sxm", node="n1", ready=True))
    await set_pod(cluster, pod("h-1", "h100-sxm", node="n2", ready=True))
    await set_pod(cluster, pod("h-2", "h100-sxm", node=None, since=400))
    await eventually(lambda: replicas(cluster, "l40s") == 1, what="fallback to l40s")
    await drop_pod(cluster, "h-2")
    await set_pod(cluster, pod("l-0", "l40s", node="n3", ready=True))
    # After the dwell one probe replica tries the H100s again, the l40s one still serving.
    await eventually(lambda: replicas(cluster, "h100-sxm") == 3, what="a probe on h100-sxm")
    assert replicas(cluster, "l40s") == 1
    await set_pod(cluster, pod("h-5", "h100-sxm", node="n5", ready=False))
    await eventually(lambda: "GpuAvailable" in reasons(cluster), what="GpuAvailable Event")
    assert replicas(cluster, "l40s") == 1  # not ready on h100 yet: the l40s replica stays
    await set_pod(cluster, pod("h-5", "h100-sxm", node="n5", ready=True))
    await eventually(lambda: replicas(cluster, "l40s") is None, what="l40s Deployment removed")
    assert replicas(cluster, "h100-sxm") == 3
    cond = await eventually(
        lambda: (c := gpu_condition(cluster))["status"] == "False" and c, what="GpuFallback False"
    )
    assert cond["reason"] == "OnPreferredType"
