"""Issue 8: the operator harms nothing it does not own, and no LLMService can stall it.

The real operator (kopf.operator in-process) against the kmock apiserver; each test shows
one numbered item of the issue. States are polled for, never timed.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import socket
import threading
from pathlib import Path
from typing import Any

import httpx
import kopf
import yaml

from tests.support.cluster_objects import (
    DEPLOYMENTS,
    LLMS_PATH,
    PVCS,
    SERVICES,
    condition,
    create,
    example,
    llms,
    owned,
    patch,
)
from tests.support.operator_harness import NAMESPACE, StartOperator, eventually
from tokenfleet.controller.kube import KubeClient
from tokenfleet.controller.reconcile import Pipeline, Policy
from tokenfleet.testing.kmock_cluster import LWS, Cluster

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


# --- 2. bounded, off-loop planning ---------------------------------------------------------


def inline_config(name: str, **config: Any) -> dict[str, Any]:
    body = example("finetune-inline-config.yaml")
    body["metadata"]["name"] = name
    body["spec"]["model"]["config"].update(config)
    return body


async def test_an_absurd_architecture_is_refused_and_stalls_nobody(
    cluster: Cluster, start_operator: StartOperator
) -> None:
    await start_operator()
    # 1e8 layers held the event loop for over a minute per reconcile before the bounds.
    await create(cluster, inline_config("deep", num_hidden_layers=100_000_000))
    await create(cluster, inline_config("wide", num_attention_heads=-4, head_dim="x"))
    await create(cluster, example("llama-3.1-8b-l4.yaml"))

    await eventually(lambda: cluster.get(DEPLOYMENTS, NAMESPACE, NAME), what="the good Deployment")
    deep = await wait_degraded(cluster, "deep", "PlanFailed")
    assert "num_hidden_layers" in deep["message"] and "1 to 1024" in deep["message"]
    wide = await wait_degraded(cluster, "wide", "PlanFailed")
    assert "num_attention_heads" in wide["message"]
    assert not cluster.get(DEPLOYMENTS, NAMESPACE, "deep")
    assert not cluster.get(DEPLOYMENTS, NAMESPACE, "wide")


async def test_a_plan_past_its_time_limit_is_abandoned_and_stalls_nobody(
    cluster: Cluster, start_operator: StartOperator
) -> None:
    release = threading.Event()
    pipeline = Pipeline.default()
    real_plan = pipeline.plan

    def plan(request: Any) -> Any:
        if request.arch.name == "acme/llama-3.1-8b-support-ft":
            release.wait(60)  # a plan that never ends (on its worker thread)
        return real_plan(request)

    await start_operator(dataclasses.replace(pipeline, plan=plan), step_seconds=0.5)
    try:
        await create(cluster, inline_config("stuck"))
        await create(cluster, example("llama-3.1-8b-l4.yaml"))
        await eventually(lambda: cluster.get(DEPLOYMENTS, NAMESPACE, NAME), what="the good one")
        stuck = await wait_degraded(cluster, "stuck", "PlanFailed")
        assert "longer than" in stuck["message"] and "spec.model.config" in stuck["message"]
        assert not cluster.get(DEPLOYMENTS, NAMESPACE, "stuck")
    finally:
        release.set()


async def test_healthz_answers_while_a_plan_runs(
    cluster: Cluster, start_operator: StartOperator
) -> None:
    """plan() and render run on a worker thread: kopf's liveness endpoint, served by the
    operator's event loop, answers while one is busy (here: held until the probe is done),
    so a slow spec never gets the operator restarted by its livenessProbe."""
    started, release = threading.Event(), threading.Event()
    pipeline = Pipeline.default()
    real_plan = pipeline.plan

    def plan(request: Any) -> Any:
        if request.arch.name == "acme/llama-3.1-8b-support-ft":
            started.set()
            release.wait(60)
        return real_plan(request)

    with socket.socket() as probe_port:
        probe_port.bind(("127.0.0.1", 0))
        port = probe_port.getsockname()[1]
    health = f"http://127.0.0.1:{port}/healthz"
    await start_operator(dataclasses.replace(pipeline, plan=plan), liveness=health)
    try:
        await create(cluster, inline_config("busy"))
        assert await asyncio.to_thread(started.wait, 30), "the plan never started"
        response = None
        async with httpx.AsyncClient() as client:
            for _ in range(300):  # the endpoint binds as kopf starts: refused means "not yet"
                try:
                    response = await client.get(health, timeout=10)
                    break
                except httpx.ConnectError:
                    await asyncio.sleep(0.1)
        assert response is not None, f"nothing listens on {health}"
        assert response.status_code == 200
        assert not release.is_set()  # answered while the plan was still running
    finally:
        release.set()
    # Once the plan ends, the reconcile finishes as usual.
    await eventually(lambda: cluster.get(DEPLOYMENTS, NAMESPACE, "busy"), what="its Deployment")


# --- 3. prune what is no longer rendered ---------------------------------------------------


def to_multi_node(body: dict[str, Any]) -> dict[str, Any]:
    """The spec change that moves a replica from one node to two (a LeaderWorkerSet)."""
    multi = example("llama-3.1-405b-multinode.yaml")["spec"]
    model = {**multi["model"], "source": {"huggingFace": None, **multi["model"]["source"]}}
    # The weights come pre-loaded from a claim, so no ReadWriteOnce download cache (one
    # node) is carried over to a replica that spans two.
    spec = {"model": model, "gpu": multi["gpu"], "workload": multi["workload"], "storage": None}
    return {"spec": spec}


async def test_moving_to_a_leader_worker_set_removes_the_deployment(
    cluster: Cluster, start_operator: StartOperator
) -> None:
    cluster.install(LWS)
    await start_operator()
    body = example("llama-3.1-8b-l4.yaml")
    await create(cluster, body)
    await eventually(lambda: cluster.get(DEPLOYMENTS, NAMESPACE, NAME), what="the Deployment")
    # A namesake Deployment someone else labelled as ours: not owned, so never pruned.
    decoy = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "decoy", "labels": {"tokenfleet.dev/llmservice": NAME}},
        "spec": {"replicas": 1},
    }
    await create(cluster, decoy, f"/apis/apps/v1/namespaces/{NAMESPACE}/deployments")

    await patch(cluster, f"{LLMS_PATH}/{NAME}", to_multi_node(body))
    await eventually(lambda: cluster.get(LWS, NAMESPACE, f"{NAME}-lws"), what="the LWS")
    await eventually(
        lambda: cluster.get(DEPLOYMENTS, NAMESPACE, NAME) is None, what="the old Deployment gone"
    )
    assert cluster.get(DEPLOYMENTS, NAMESPACE, "decoy")  # not ours: untouched
    assert cluster.get(PVCS, NAMESPACE, f"{NAME}-model-cache")  # still rendered: kept


async def test_removing_storage_keeps_the_cache_by_default_and_says_so(
    cluster: Cluster, start_operator: StartOperator
) -> None:
    await start_operator()
    await create(cluster, example("llama-3.1-8b-l4.yaml"))
    claim = f"{NAME}-model-cache"
    await eventually(lambda: cluster.get(PVCS, NAMESPACE, claim), what="the PVC")

    await patch(cluster, f"{LLMS_PATH}/{NAME}", {"spec": {"storage": None}})
    await eventually(
        lambda: llms(cluster, NAME).get("status", {}).get("retainedClaims") == [claim],
        what="status.retainedClaims",
    )
    assert cluster.get(PVCS, NAMESPACE, claim)  # kept: the default retain policy
    deployment = cluster.get(DEPLOYMENTS, NAMESPACE, NAME)
    volumes = deployment["spec"]["template"]["spec"]["volumes"]
    assert {"name": "model-cache", "emptyDir": {}} in volumes

    # Opt out: storage back with retain false, then removed -> the claim is deleted.
    await patch(
        cluster, f"{LLMS_PATH}/{NAME}", {"spec": {"storage": {"size": "50Gi", "retain": False}}}
    )
    await eventually(
        lambda: (
            cluster.get(PVCS, NAMESPACE, claim)["metadata"]["annotations"]["tokenfleet.dev/retain"]
            == "false"
        ),
        what="the retain policy on the claim",
    )
    await eventually(
        lambda: "retainedClaims" not in llms(cluster, NAME).get("status", {}),
        what="the note cleared once the claim is rendered again",
    )
    await patch(cluster, f"{LLMS_PATH}/{NAME}", {"spec": {"storage": None}})
    await eventually(lambda: cluster.get(PVCS, NAMESPACE, claim) is None, what="the PVC deleted")


# --- 4. nothing half-created --------------------------------------------------------------


async def test_a_manifest_the_api_server_refuses_leaves_nothing_behind(
    cluster: Cluster, start_operator: StartOperator
) -> None:
    # An admission webhook refuses the Deployment; the PVC comes first in apply order.
    message = 'admission webhook "policy.example.com" denied: spec.template.spec.runtimeClassName'
    cluster.fail("PATCH", r"/deployments/llama-3-1-8b$", 422, message=message, dry_run=True)
    await start_operator()
    await create(cluster, example("llama-3.1-8b-l4.yaml"))

    cond = await wait_degraded(cluster, NAME, "ApplyFailed")
    assert "spec.template.spec.runtimeClassName" in cond["message"]
    assert owned(cluster) == []  # not even the PVC
    assert cluster.writes_of("persistentvolumeclaims") == []


HOSTILE_VALUES: list[tuple[str, dict[str, Any], str]] = [
    ("zero-storage", {"storage": {"size": "0"}}, "spec.storage.size"),
    ("bad-label", {"podTemplate": {"labels": {"team/": "x"}}}, "spec.podTemplate.labels"),
    ("bad-label-value", {"podTemplate": {"labels": {"team": "a b"}}}, "spec.podTemplate.labels"),
    ("bad-cpu", {"resources": {"requests": {"cpu": "lots"}}}, "spec.resources.requests.cpu"),
    ("bad-affinity", {"gpu": {"affinity": {"nodeAfinity": {}}}}, "spec.gpu.affinity"),
    (
        "dup-env",
        {"engine": {"env": [{"name": "A", "value": "1"}, {"name": "A", "value": "2"}]}},
        "spec.engine.env",
    ),
]


async def test_values_the_api_server_would_refuse_are_refused_by_field(
    cluster: Cluster, start_operator: StartOperator
) -> None:
    await start_operator()
    for name, spec, _ in HOSTILE_VALUES:
        body = example("llama-3.1-8b-l4.yaml")
        body["metadata"]["name"] = name
        for section, value in spec.items():
            body["spec"][section] = {**(body["spec"].get(section) or {}), **value}
        await create(cluster, body)
    for name, _, field in HOSTILE_VALUES:
        cond = await wait_degraded(cluster, name)
        assert (cond["reason"], field) == ("InvalidSpec", field) and field in cond["message"]
    assert owned(cluster) == []


# --- 6. one recheck timer per LLMService ---------------------------------------------------


async def test_twenty_edits_while_waiting_leave_one_recheck_timer(
    cluster: Cluster, start_operator: StartOperator
) -> None:
    # A long recheck: the timers stay pending for the whole test, so they can be counted.
    operator = await start_operator(recheck_seconds=3600.0)
    await create(cluster, example("qwen2.5-7b-configmap.yaml"))
    name = "qwen2-5-7b"
    await wait_degraded(cluster, name, "ConfigMapNotFound")
    for replicas in range(2, 22):  # 20 edits, each reconcile ends waiting on the ConfigMap
        await patch(cluster, f"{LLMS_PATH}/{name}", {"spec": {"replicas": replicas}})
    await eventually(
        lambda: llms(cluster, name).get("status", {}).get("observedGeneration") == 21,
        what="the 20th edit reconciled",
    )
    assert operator.drift.pending_rechecks == {(NAMESPACE, name)}


# --- 5. persistent errors become status ----------------------------------------------------


async def test_a_persistent_server_error_is_reported_then_cleared(
    cluster: Cluster, start_operator: StartOperator
) -> None:
    cluster.fail("PATCH", r"/deployments/llama-3-1-8b$", 500, times=10_000, message="etcd down")
    operator = await start_operator()
    await create(cluster, example("llama-3.1-8b-l4.yaml"))

    cond = await wait_degraded(cluster, NAME, "ApplyRetrying")
    assert "etcd down" in cond["message"] and f"Deployment {NAMESPACE}/{NAME}" in cond["message"]
    assert llms(cluster, NAME)["status"]["phase"] == "Degraded"

    cluster.clear_faults()  # the outage ends: the next retry applies and clears the report
    await eventually(
        lambda: condition(cluster, NAME, "Degraded").get("status") == "False",
        timeout=90,  # the backoff is capped at 60 s
        what="Degraded=False after the outage",
    )
    assert cluster.get(DEPLOYMENTS, NAMESPACE, NAME)
    assert operator.metrics.reconciles.labels("retry")._value.get() >= 3


# --- 8. Pod Security "restricted" ----------------------------------------------------------


async def test_the_applied_engine_pod_is_locked_down(
    cluster: Cluster, start_operator: StartOperator
) -> None:
    await start_operator()
    await create(cluster, example("llama-3.1-8b-nonroot.yaml"))
    deployment = await eventually(
        lambda: cluster.get(DEPLOYMENTS, NAMESPACE, "llama-3-1-8b-nonroot"), what="Deployment"
    )
    pod = deployment["spec"]["template"]["spec"]
    assert pod["automountServiceAccountToken"] is False
    assert pod["securityContext"] == {
        "seccompProfile": {"type": "RuntimeDefault"},
        "runAsNonRoot": True,
        "runAsUser": 1000,
        "runAsGroup": 1000,
        "fsGroup": 1000,
    }
    assert pod["containers"][0]["securityContext"] == {
        "allowPrivilegeEscalation": False,
        "capabilities": {"drop": ["ALL"]},
    }


# --- 9. creating an LLMService reveals no secret --------------------------------------------

SECRET = "sk-live-0123456789abcdef"


async def test_user_text_cannot_splice_env_into_args_and_literal_env_is_redacted(
    cluster: Cluster, start_operator: StartOperator
) -> None:
    await start_operator()
    body = example("llama-3.1-8b-l4.yaml")
    body["spec"]["engine"]["args"] = ["--api-key", "$(HF_TOKEN)"]
    body["spec"]["model"]["servedName"] = "llama-$(HF_TOKEN)"
    await create(cluster, body)
    deployment = await eventually(lambda: cluster.get(DEPLOYMENTS, NAMESPACE, NAME), what="Deploy")
    args = deployment["spec"]["template"]["spec"]["containers"][0]["args"]
    assert "$$(HF_TOKEN)" in args and "llama-$$(HF_TOKEN)" in args

    # The API server refuses a manifest and echoes the env value into its message.
    leaky = example("llama-3.1-8b-l4.yaml")
    leaky["metadata"]["name"] = "leaky"
    leaky["spec"]["engine"]["env"] = [{"name": "PROXY_TOKEN", "value": SECRET}]
    echo = f'Deployment "leaky" is invalid: env[0].value: "{SECRET}": too long'
    cluster.fail("PATCH", r"/deployments/leaky$", 422, times=100, message=echo)
    await create(cluster, leaky)
    cond = await wait_degraded(cluster, "leaky", "ApplyFailed")
    assert SECRET not in cond["message"] and 'env[0].value: "***"' in cond["message"]
    await eventually(
        lambda: any(e.get("reason") == "Degraded" for e in cluster.items("v1/events")),
        what="the Degraded event",
    )
    assert all(SECRET not in str(e) for e in cluster.items("v1/events"))


async def test_allowlists_refuse_other_images_and_service_accounts(
    cluster: Cluster, start_operator: StartOperator
) -> None:
    policy = Policy(image_prefixes=("registry.corp/",), service_accounts=("llm-runner",))
    await start_operator(policy=policy)
    await create(cluster, example("llama-3.1-8b-l4.yaml"))
    cond = await wait_degraded(cluster, NAME, "NotAllowed")
    assert "spec.engine.image=vllm/vllm-openai:" in cond["message"]
    assert "registry.corp/" in cond["message"]

    body = example("llama-3.1-8b-l4.yaml")
    body["metadata"]["name"] = "robot"
    body["spec"]["engine"].update(image="registry.corp/vllm:v0.11.0", version="0.11.0")
    body["spec"]["podTemplate"] = {"serviceAccountName": "cluster-admin-sa"}
    await create(cluster, body)
    cond = await wait_degraded(cluster, "robot", "NotAllowed")
    assert "spec.podTemplate.serviceAccountName=cluster-admin-sa" in cond["message"]

    await patch(
        cluster,
        f"{LLMS_PATH}/robot",
        {"spec": {"podTemplate": {"serviceAccountName": "llm-runner"}}},
    )
    await eventually(lambda: cluster.get(DEPLOYMENTS, NAMESPACE, "robot"), what="allowed one")
    assert owned(cluster) and all(o["metadata"]["name"].startswith("robot") for o in owned(cluster))


# --- 10. refuse what can never become Ready ------------------------------------------------


async def test_args_the_operator_owns_and_untagged_images_are_refused(
    cluster: Cluster, start_operator: StartOperator
) -> None:
    await start_operator()
    cases = {
        "own-port": ({"args": ["--port", "9000"]}, "spec.engine.args", "remove it"),
        "own-tp": (
            {"args": ["--tensor-parallel-size=2"]},
            "spec.engine.args",
            "tensorParallelSize",
        ),
        "untagged": ({"image": "vllm/vllm-openai"}, "spec.engine.image", "pin a tag"),
    }
    for name, (engine, _, _) in cases.items():
        body = example("llama-3.1-8b-l4.yaml")
        body["metadata"]["name"] = name
        body["spec"]["engine"].update(engine)
        await create(cluster, body)
    for name, (_, field, fix) in cases.items():
        cond = await wait_degraded(cluster, name, "InvalidSpec")
        assert field in cond["message"] and fix in cond["message"], cond
    assert owned(cluster) == []


# --- 11. smaller ---------------------------------------------------------------------------


async def test_a_relogin_does_not_close_the_client_under_requests_in_flight(
    cluster: Cluster,
) -> None:
    config = yaml.safe_load(Path(os.environ["KUBECONFIG"]).read_text())
    server = config["clusters"][0]["cluster"]["server"]
    logins: list[bool] = []

    async def login(renew: bool) -> kopf.ConnectionInfo:
        logins.append(renew)
        return kopf.ConnectionInfo(server=server, token="t")

    kube = KubeClient(login)
    await create(cluster, example("llama-3.1-8b-l4.yaml"))
    await kube.get("v1", "Namespace", None, NAMESPACE)  # logged in, client open
    # Ten requests are on the wire (the apiserver holds them) when another one is
    # answered 401 (a rotated token) and the client logs in again.
    gate = cluster.hold("GET", r"/deployments/")
    held = [
        asyncio.create_task(kube.get("apps/v1", "Deployment", NAMESPACE, f"d{i}"))
        for i in range(10)
    ]
    await eventually(lambda: cluster.held == 10, what="ten requests in flight")
    cluster.fail("GET", r"/llmservices/llama-3-1-8b$", 401, times=1)
    try:
        fresh = await kube.get("tokenfleet.dev/v1alpha1", "LLMService", NAMESPACE, NAME)
        gate.set()
        results = await asyncio.gather(*held)
    finally:
        gate.set()
        await kube.close()
    assert fresh and fresh["metadata"]["name"] == NAME
    assert results == [None] * 10  # answered (404) on the old client, not failed
    assert logins.count(True) == 1  # logged in again once, not once per request


async def test_a_failure_in_a_drift_pass_is_retried_not_dropped(
    cluster: Cluster, start_operator: StartOperator
) -> None:
    operator = await start_operator()
    await create(cluster, example("llama-3.1-8b-l4.yaml"))
    await eventually(lambda: cluster.get(SERVICES, NAMESPACE, NAME), what="the Service")

    kube = operator.reconciler.kube
    real_apply = kube.apply
    failures: list[str] = []

    async def broken_once(*args: Any, **kwargs: Any) -> Any:
        # Fails the first pass that runs after the Service was deleted, before it
        # re-creates it, whatever other passes ran before.
        if not failures and drifting.is_set():
            failures.append("raised")
            raise RuntimeError("a bug in a drift pass")
        return await real_apply(*args, **kwargs)

    drifting = threading.Event()
    kube.apply = broken_once  # type: ignore[method-assign]
    drifting.set()
    response = await cluster.delete(f"/api/v1/namespaces/{NAMESPACE}/services/{NAME}")
    assert response.status < 300
    # The drift pass that re-creates the Service fails once, then its retry succeeds.
    await eventually(lambda: cluster.get(SERVICES, NAMESPACE, NAME), what="the Service back")
    assert failures == ["raised"]
