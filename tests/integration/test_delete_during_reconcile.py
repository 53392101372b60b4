"""An LLMService deleted while its reconcile runs gets nothing applied after the delete
(issue 30: a pass in flight re-applied 35 children of deleted LLMServices in 1 run of 3).

The apiserver holds the pass at a chosen request, the LLMService is deleted, the request
is released: the pass stops before its next write (re-checked under its lock: a fresh read
before the first write, and the watch's DELETED event before each), counted as a reconcile
whose result is `gone`.
"""

from __future__ import annotations

from tests.support.cluster_objects import DEPLOYMENTS, LLMS_PATH, PDBS, SERVICES, create, example
from tests.support.operator_harness import NAMESPACE, RunningOperator, StartOperator, eventually
from tokenfleet.testing.kmock_cluster import Cluster

NAME = "llama-3-1-8b"


def gone(operator: RunningOperator) -> float:
    value = operator.metrics.registry.get_sample_value(
        "tokenfleet_reconciles_total", {"result": "gone"}
    )
    return value or 0.0


def children(cluster: Cluster) -> list[str]:
    return [key for key in (DEPLOYMENTS, SERVICES, PDBS) if cluster.get(key, NAMESPACE, NAME)]


async def test_deleted_during_the_dry_run_nothing_is_written(
    cluster: Cluster, start_operator: StartOperator
) -> None:
    operator = await start_operator()
    gate = cluster.hold("PATCH", rf"/deployments/{NAME}$", dry_run=True)
    await create(cluster, example("llama-3.1-8b-l4.yaml"))
    try:
        await eventually(lambda: cluster.held >= 1, what="the pass at its dry-run")
        assert (await cluster.delete(f"{LLMS_PATH}/{NAME}")).status < 300
    finally:
        gate.set()
    await eventually(lambda: gone(operator) >= 1, what="the pass to stop")
    assert children(cluster) == []


async def test_deleted_during_a_drift_pass_the_rest_is_not_written(
    cluster: Cluster, start_operator: StartOperator
) -> None:
    """A drift pass runs beside kopf's per-object worker, so the watch's DELETED event
    reaches the reconciler while the pass's first write is on the wire."""
    operator = await start_operator()
    await create(cluster, example("llama-3.1-8b-l4.yaml"))
    await eventually(lambda: cluster.get(PDBS, NAMESPACE, NAME), what="the first reconcile")
    gate = cluster.hold("PATCH", rf"/deployments/{NAME}$", dry_run=False)
    try:
        deployment = f"/apis/apps/v1/namespaces/{NAMESPACE}/deployments/{NAME}"
        assert (await cluster.delete(deployment)).status < 300  # drift: a pass re-applies
        await eventually(lambda: cluster.held >= 1, what="the drift pass at its first write")
        assert (await cluster.delete(f"{LLMS_PATH}/{NAME}")).status < 300
        await eventually(
            lambda: operator.reconciler._deleted.get((NAMESPACE, NAME)), what="the deletion seen"
        )
        # The garbage collector removed the children of the deleted LLMService.
        await eventually(lambda: not cluster.get(SERVICES, NAMESPACE, NAME), what="GC")
    finally:
        gate.set()
    await eventually(lambda: gone(operator) >= 1, what="the pass to stop")
    # The Deployment's write was on the wire (the garbage collector's to remove); nothing
    # after it was written again.
    assert cluster.get(SERVICES, NAMESPACE, NAME) is None
    assert cluster.get(PDBS, NAMESPACE, NAME) is None
