"""spec.routing against the real operator (kopf in-process) and the kmock apiserver.

On: the InferencePool, the endpoint picker, its ServiceAccount and its RoleBinding to the
chart's picker ClusterRole are created, owned by the LLMService, and the Routing condition
says so. Where the operator may not write them (a namespace outside the chart's routing
namespaces: a 403), the LLMService is Degraded with the fix and nothing is created. Off
again: everything routing created is deleted, the engines stay. The InferencePool CRD
missing: the reconcile does not fail, the engines are applied as without routing, none of
the routing objects is created, and the Routing condition names what to install.
minReplicas 0 without routing: refused with the field and the fix, nothing created.
"""

from __future__ import annotations

import copy
from typing import Any

from tests.support.cluster_objects import (
    DEPLOYMENTS,
    LLMS_PATH,
    SERVICES,
    condition,
    condition_when,
    create,
    degraded_condition,
    events,
    example,
    llms,
    patch,
)
from tests.support.operator_harness import NAMESPACE, StartOperator, eventually
from tokenfleet.testing.kmock_cluster import HTTPROUTES, INFERENCEPOOLS, PODMONITORS, Cluster

NAME = "llama-3-1-8b-zero"
PICKER = f"{NAME}-epp"
ACCOUNTS = "v1/serviceaccounts"
BINDINGS = "rbac.authorization.k8s.io/v1/rolebindings"
# (key, name) of every routing object the example renders.
ROUTING = [
    (ACCOUNTS, PICKER), (BINDINGS, PICKER), (DEPLOYMENTS, PICKER), (SERVICES, PICKER),
    (INFERENCEPOOLS, NAME), (HTTPROUTES, NAME), (PODMONITORS, PICKER),
]  # fmt: skip


def zero_example() -> dict[str, Any]:
    return example("llama-3.1-8b-l4-scale-to-zero.yaml")


def present(cluster: Cluster) -> list[tuple[str, str]]:
    return [(key, name) for key, name in ROUTING if cluster.get(key, NAMESPACE, name)]


async def test_routing_on_then_off(cluster: Cluster, start_operator: StartOperator) -> None:
    for api in (INFERENCEPOOLS, HTTPROUTES, PODMONITORS):
        cluster.install(api)
    await start_operator()
    await create(cluster, zero_example())
    routing = await condition_when(cluster, NAME, "Routing", status="True")
    assert routing["reason"] == "PoolApplied"
    assert present(cluster) == ROUTING
    uid = llms(cluster, NAME)["metadata"]["uid"]
    for key, name in ROUTING:
        refs = cluster.get(key, NAMESPACE, name)["metadata"]["ownerReferences"]
        assert [r["uid"] for r in refs] == [uid], (key, name)
    pool = cluster.get(INFERENCEPOOLS, NAMESPACE, NAME)
    assert pool["spec"]["endpointPickerRef"]["name"] == PICKER
    engines = cluster.get(DEPLOYMENTS, NAMESPACE, NAME)
    pod_labels = engines["spec"]["template"]["metadata"]["labels"]
    assert pool["spec"]["selector"]["matchLabels"].items() <= pod_labels.items()
    # The status keeps pointing at the engines' own Service, not the picker's.
    assert llms(cluster, NAME)["status"]["endpoint"].startswith(f"http://{NAME}.")

    path = f"{LLMS_PATH}/{NAME}"
    # minReplicas 0 must go first: without routing it is refused.
    await patch(cluster, path, {"spec": {"autoscaling": {"minReplicas": 1}}})
    await patch(cluster, path, {"spec": {"routing": {"enabled": False}}})
    await eventually(lambda: not present(cluster), what="every routing object deleted")
    # Pruned within the reconcile; its status is written right after.
    await condition_when(cluster, NAME, "Routing", reason="Disabled")
    assert condition(cluster, NAME, "Degraded")["status"] == "False"
    assert cluster.get(DEPLOYMENTS, NAMESPACE, NAME)  # the engines stay
    assert cluster.get(SERVICES, NAMESPACE, NAME)


async def test_inference_pool_crd_missing_is_a_condition_not_a_failure(
    cluster: Cluster, start_operator: StartOperator
) -> None:
    cluster.install(PODMONITORS)  # no InferencePool, no HTTPRoute API
    await start_operator()
    await create(cluster, zero_example())
    routing = await condition_when(cluster, NAME, "Routing", reason="InferencePoolMissing")
    assert routing["status"] == "False"
    assert "inference.networking.k8s.io/v1" in routing["message"]
    assert "gateway-api-inference-extension" in routing["message"]  # what to install
    assert condition(cluster, NAME, "Degraded")["status"] == "False"
    # The engines serve through the plain Service; nothing of the router half-exists.
    assert cluster.get(DEPLOYMENTS, NAMESPACE, NAME)
    assert cluster.get(SERVICES, NAMESPACE, NAME)
    assert present(cluster) == []
    # `kubectl describe` shows it as a Warning Event too.
    warned = await eventually(
        lambda: [e for e in events(cluster) if e.get("reason") == "InferencePoolMissing"],
        what="the InferencePoolMissing Event",
    )
    assert warned[0]["type"] == "Warning"


async def test_min_replicas_zero_without_routing_is_refused(
    cluster: Cluster, start_operator: StartOperator
) -> None:
    """The CRD's CEL rule stops this at kubectl apply; an object that slips past it (an
    older CRD) is refused by the operator with the same sentence, nothing created."""
    for api in (INFERENCEPOOLS, HTTPROUTES):
        cluster.install(api)
    await start_operator()
    body = copy.deepcopy(zero_example())
    body["spec"]["routing"] = {"enabled": False}
    await create(cluster, body)
    degraded = await degraded_condition(cluster, NAME)
    assert degraded["reason"] == "InvalidSpec"
    assert "spec.autoscaling.minReplicas: 0 needs spec.routing.enabled: true" in degraded["message"]
    assert "set spec.autoscaling.minReplicas to 1 or more" in degraded["message"]
    assert cluster.get(DEPLOYMENTS, NAMESPACE, NAME) is None
    assert present(cluster) == []


async def test_a_namespace_without_routing_rights_is_degraded_with_the_fix(
    cluster: Cluster, start_operator: StartOperator
) -> None:
    """The chart grants routing's writes only in its routing namespaces: elsewhere the API
    server refuses the picker's ServiceAccount (403) at the dry-run, before any write."""
    for api in (INFERENCEPOOLS, HTTPROUTES, PODMONITORS):
        cluster.install(api)
    forbidden = 'serviceaccounts "x" is forbidden: User "system:serviceaccount:t:tf" cannot patch'
    cluster.fail("PATCH", r"/serviceaccounts/", 403, times=10**6, message=forbidden)
    await start_operator()
    await create(cluster, zero_example())
    degraded = await degraded_condition(cluster, NAME)
    assert degraded["reason"] == "ApplyFailed"
    assert "403" in degraded["message"] and "routingNamespaces" in degraded["message"]
    assert present(cluster) == []
    assert cluster.get(DEPLOYMENTS, NAMESPACE, NAME) is None  # nothing half-created
