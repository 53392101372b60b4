"""The real operator (kopf.operator in-process) against the kmock apiserver.

Every test asserts state reached within a generous timeout, never how long it took.
"""

from __future__ import annotations

import jsonschema
from prometheus_client import generate_latest

from tests.support.cluster_objects import (
    DEPLOYMENTS,
    LLMS_PATH,
    PDBS,
    SERVICES,
    arg,
    condition,
    crd_status_schema,
    create,
    degraded_condition,
    engine_args,
    events,
    example,
    llms,
    owned,
    patch,
)
from tests.support.operator_harness import NAMESPACE, StartOperator, eventually
from tokenfleet.testing.kmock_cluster import LWS, Cluster


async def test_create_applies_workload_with_owner_references_and_status(
    cluster: Cluster, start_operator: StartOperator
) -> None:
    operator = await start_operator()
    await create(cluster, example("llama-3.1-8b-l4.yaml"))

    deployment = await eventually(
        lambda: cluster.get(DEPLOYMENTS, NAMESPACE, "llama-3-1-8b"), what="the Deployment"
    )
    await eventually(lambda: cluster.get(SERVICES, NAMESPACE, "llama-3-1-8b"), what="Service")
    owner = llms(cluster, "llama-3-1-8b")
    refs = deployment["metadata"]["ownerReferences"]
    assert refs == [
        {
            "apiVersion": "tokenfleet.dev/v1alpha1",
            "kind": "LLMService",
            "name": "llama-3-1-8b",
            "uid": owner["metadata"]["uid"],
            "controller": True,
            "blockOwnerDeletion": True,
        }
    ]
    assert deployment["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "tokenfleet"
    assert arg(engine_args(deployment), "--max-model-len") == "8192"

    status = await eventually(
        lambda: (
            llms(cluster, "llama-3-1-8b").get("status", {}).get("observedGeneration") == 1
            and llms(cluster, "llama-3-1-8b")["status"]
        ),
        what="status.observedGeneration",
    )
    assert status["phase"] == "Progressing"
    assert status["endpoint"].startswith(f"http://llama-3-1-8b.{NAMESPACE}.svc.cluster.local:")
    assert status["endpoint"].endswith("/v1")
    assert status["replicas"] == 1 and status["readyReplicas"] == 0
    assert status["plan"]["tensorParallelSize"] == 1
    conditions = {c["type"]: c for c in status["conditions"]}
    assert conditions["Planned"]["status"] == "True"
    assert conditions["Degraded"]["status"] == "False"
    assert conditions["Progressing"]["status"] == "True"
    assert conditions["Autoscaling"]["status"] == "Unknown"  # enabled, no decision yet
    jsonschema.validate(status, crd_status_schema())  # what a real apiserver would accept

    # The Deployment controller reports the pod ready -> Ready, without a new transition
    # time on the conditions that did not change.
    planned_time = conditions["Planned"]["lastTransitionTime"]
    await patch(
        cluster,
        f"/apis/apps/v1/namespaces/{NAMESPACE}/deployments/llama-3-1-8b/status",
        {"status": {"replicas": 1, "readyReplicas": 1}},
    )
    await eventually(
        lambda: condition(cluster, "llama-3-1-8b", "Ready").get("status") == "True",
        what="Ready=True",
    )
    status = llms(cluster, "llama-3-1-8b")["status"]
    assert status["phase"] == "Ready" and status["readyReplicas"] == 1
    assert condition(cluster, "llama-3-1-8b", "Planned")["lastTransitionTime"] == planned_time
    await eventually(
        lambda: {"Planned", "Applied", "Ready"} <= {e.get("reason") for e in events(cluster)},
        what="Planned, Applied and Ready events",
    )
    exposition = generate_latest(operator.metrics.registry).decode()
    assert 'tokenfleet_reconciles_total{result="applied"}' in exposition
    assert 'tokenfleet_plans_total{outcome="ok"}' in exposition
    assert "tokenfleet_reconcile_duration_seconds_bucket" in exposition


async def test_spec_change_rolls_out_new_engine_args(
    cluster: Cluster, start_operator: StartOperator
) -> None:
    await start_operator()
    await create(cluster, example("llama-3.1-8b-l4.yaml"))
    await eventually(lambda: cluster.get(DEPLOYMENTS, NAMESPACE, "llama-3-1-8b"), what="Deploy")

    await patch(
        cluster,
        f"{LLMS_PATH}/llama-3-1-8b",
        {"spec": {"workload": {"maxModelLen": 4096}, "replicas": 2}},
    )
    deployment = await eventually(
        lambda: (
            (d := cluster.get(DEPLOYMENTS, NAMESPACE, "llama-3-1-8b"))
            and arg(engine_args(d), "--max-model-len") == "4096"
            and d
        ),
        what="--max-model-len 4096 applied",
    )
    assert deployment["spec"]["replicas"] == 2
    await eventually(
        lambda: llms(cluster, "llama-3-1-8b").get("status", {}).get("observedGeneration") == 2,
        what="observedGeneration 2",
    )


async def test_delete_cascades_through_owner_references(
    cluster: Cluster, start_operator: StartOperator
) -> None:
    await start_operator()
    await create(cluster, example("llama-3.1-8b-l4.yaml"))
    await eventually(lambda: len(owned(cluster)) >= 3, what="owned objects")

    response = await cluster.delete(f"{LLMS_PATH}/llama-3-1-8b")
    assert response.status < 300
    await eventually(lambda: not owned(cluster), what="cascading deletion")
    assert llms(cluster, "llama-3-1-8b") == {}


async def test_drift_is_corrected(cluster: Cluster, start_operator: StartOperator) -> None:
    await start_operator()
    await create(cluster, example("llama-3.1-8b-l4.yaml"))
    await eventually(lambda: cluster.get(PDBS, NAMESPACE, "llama-3-1-8b"), what="the PDB")

    # Someone scales the Deployment by hand and deletes the Service.
    await patch(
        cluster,
        f"/apis/apps/v1/namespaces/{NAMESPACE}/deployments/llama-3-1-8b",
        {"spec": {"replicas": 7}},
    )
    response = await cluster.delete(f"/api/v1/namespaces/{NAMESPACE}/services/llama-3-1-8b")
    assert response.status < 300

    await eventually(
        lambda: cluster.get(DEPLOYMENTS, NAMESPACE, "llama-3-1-8b")["spec"]["replicas"] == 1,
        what="replicas restored to the spec's 1",
    )
    service = await eventually(
        lambda: cluster.get(SERVICES, NAMESPACE, "llama-3-1-8b"), what="Service re-created"
    )
    assert service["metadata"]["ownerReferences"][0]["name"] == "llama-3-1-8b"
    await eventually(
        lambda: "DriftCorrected" in {e.get("reason") for e in cluster.items("v1/events")},
        what="a DriftCorrected event",
    )


async def test_restart_creates_nothing_twice(
    cluster: Cluster, start_operator: StartOperator
) -> None:
    first = await start_operator()
    await create(cluster, example("llama-3.1-8b-l4.yaml"))
    await eventually(
        lambda: (
            condition(cluster, "llama-3-1-8b", "Planned").get("status") == "True"
            and len(owned(cluster)) >= 3
        ),
        what="first reconcile",
    )
    await first.stop()
    before = {o["metadata"]["uid"]: o["metadata"]["resourceVersion"] for o in owned(cluster)}
    events_before = len(cluster.items("v1/events"))

    second = await start_operator()
    # The resumed operator reconciles everything it finds: wait until it has.
    await eventually(
        lambda: second.metrics.reconciles.labels("applied")._value.get() >= 1,
        what="the resumed reconcile",
    )
    after = {o["metadata"]["uid"]: o["metadata"]["resourceVersion"] for o in owned(cluster)}
    assert after == before  # same objects, none re-created, none modified
    assert len(cluster.items("v1/events")) == events_before  # no repeated transitions


async def test_plan_failure_is_degraded_and_creates_nothing(
    cluster: Cluster, start_operator: StartOperator
) -> None:
    await start_operator()
    body = example("llama-3.1-8b-l4.yaml")
    body["metadata"]["name"] = "too-big"
    body["spec"]["model"]["id"] = "meta-llama/Llama-3.1-405B"
    body["spec"].pop("storage", None)
    await create(cluster, body)

    degraded = await degraded_condition(cluster, "too-big")
    assert degraded["reason"] == "PlanFailed"
    assert degraded["message"]
    assert condition(cluster, "too-big", "Planned")["status"] == "False"
    assert llms(cluster, "too-big")["status"]["phase"] == "Degraded"
    assert owned(cluster) == []


async def test_invalid_spec_is_degraded_with_the_parse_message(
    cluster: Cluster, start_operator: StartOperator
) -> None:
    operator = await start_operator()
    body = example("llama-3.1-8b-l4.yaml")
    body["metadata"]["name"] = "typo"
    body["spec"]["workload"]["maxModelLenn"] = 4096  # slipped past a missing CRD schema
    await create(cluster, body)

    degraded = await degraded_condition(cluster, "typo")
    assert degraded["reason"] == "InvalidSpec"
    assert "maxModelLenn" in degraded["message"]
    assert owned(cluster) == []
    assert operator.alive  # the operator is still running


async def test_missing_leaderworkerset_crd_is_degraded_and_creates_nothing(
    cluster: Cluster, start_operator: StartOperator
) -> None:
    await start_operator()
    await create(cluster, example("llama-3.1-405b-multinode.yaml"))

    degraded = await degraded_condition(cluster, "llama-3-1-405b")
    assert degraded["reason"] == "LeaderWorkerSetMissing"
    assert "install LeaderWorkerSet" in degraded["message"]
    assert (
        "kubectl apply --server-side -f https://github.com/kubernetes-sigs/lws"
        in (degraded["message"])
    )
    assert owned(cluster) == []


async def test_leaderworkerset_is_applied_when_the_crd_exists(
    cluster: Cluster, start_operator: StartOperator
) -> None:
    cluster.install(LWS)
    await start_operator()
    await create(cluster, example("llama-3.1-405b-multinode.yaml"))
    lws = await eventually(lambda: cluster.items(LWS), what="the LeaderWorkerSet")
    assert lws[0]["metadata"]["ownerReferences"][0]["name"] == "llama-3-1-405b"
    assert cluster.items(DEPLOYMENTS) == []


async def test_config_map_config_is_read_before_planning(
    cluster: Cluster, start_operator: StartOperator
) -> None:
    await start_operator()
    config_map = example("qwen2.5-7b-configmap.yaml", kind="ConfigMap")
    await create(cluster, config_map, f"/api/v1/namespaces/{NAMESPACE}/configmaps")
    await create(cluster, example("qwen2.5-7b-configmap.yaml"))
    await eventually(
        lambda: condition(cluster, "qwen2-5-7b", "Planned").get("status") == "True",
        what="Planned=True from the ConfigMap's config.json",
    )
    assert cluster.get(DEPLOYMENTS, NAMESPACE, "qwen2-5-7b")


async def test_missing_config_map_is_degraded(
    cluster: Cluster, start_operator: StartOperator
) -> None:
    await start_operator()
    await create(cluster, example("qwen2.5-7b-configmap.yaml"))
    degraded = await degraded_condition(cluster, "qwen2-5-7b")
    assert degraded["reason"] == "ConfigMapNotFound"
    assert "qwen2-5-7b-config" in degraded["message"]
    assert owned(cluster) == []


async def test_conflict_and_server_errors_are_retried_until_applied(
    cluster: Cluster, start_operator: StartOperator
) -> None:
    # On the writes themselves (not their dry-runs, which go out concurrently).
    cluster.fail("PATCH", r"/deployments/llama-3-1-8b$", 409, times=1, dry_run=False)
    cluster.fail("PATCH", r"/services/llama-3-1-8b$", 500, times=1, dry_run=False)
    operator = await start_operator()
    await create(cluster, example("llama-3.1-8b-l4.yaml"))

    await eventually(
        lambda: (
            cluster.get(DEPLOYMENTS, NAMESPACE, "llama-3-1-8b")
            and cluster.get(SERVICES, NAMESPACE, "llama-3-1-8b")
            and condition(cluster, "llama-3-1-8b", "Planned").get("status") == "True"
        ),
        what="applied after retries",
    )
    assert operator.metrics.reconciles.labels("retry")._value.get() >= 2
    assert condition(cluster, "llama-3-1-8b", "Degraded")["status"] == "False"


async def test_unprocessable_apply_is_degraded_with_the_api_message(
    cluster: Cluster, start_operator: StartOperator
) -> None:
    cluster.fail(
        "PATCH",
        r"/deployments/llama-3-1-8b$",
        422,
        times=1,
        message='Deployment.apps "llama-3-1-8b" is invalid: spec.template: Invalid value',
    )
    await start_operator()
    await create(cluster, example("llama-3.1-8b-l4.yaml"))
    degraded = await degraded_condition(cluster, "llama-3-1-8b")
    assert degraded["reason"] == "ApplyFailed"
    assert "spec.template: Invalid value" in degraded["message"]
