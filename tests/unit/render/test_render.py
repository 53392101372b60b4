"""tokenfleet.render: what the manifests promise, asserted as properties over every case.

The golden files show the whole output; these tests name the behaviour that must hold
whatever the plan is (selectors match pods, GPUs per pod, probes, names, labels...).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from tests.support.render_cases import CASES, render_case
from tokenfleet import render
from tokenfleet.commands.render import Rendered
from tokenfleet.engines import ENGINES, worker_serves_health
from tokenfleet.errors import UserError
from tokenfleet.render import routing, timing

# Disaggregated cases render a workload per role: test_render_roles.py asserts them.
AGGREGATED = [c for c in CASES if not c.endswith("-pd")]
MULTI_NODE = [c for c in AGGREGATED if "two-nodes" in c]
SINGLE_NODE = [c for c in AGGREGATED if c not in MULTI_NODE]
DESIGN_LABELS = (
    "app.kubernetes.io/name",
    "app.kubernetes.io/instance",
    "app.kubernetes.io/managed-by",
    "tokenfleet.dev/llmservice",
)


def by_kind(r: Rendered) -> dict[str, dict[str, Any]]:
    kinds = [m["kind"] for m in r.manifests]
    assert len(kinds) == len(set(kinds)), f"one manifest per kind: {kinds}"
    return {m["kind"]: m for m in r.manifests}


def templates(workload: dict[str, Any]) -> dict[str, dict[str, Any]]:
    if workload["kind"] == "Deployment":
        return {"server": workload["spec"]["template"]}
    group = workload["spec"]["leaderWorkerTemplate"]
    return {"leader": group["leaderTemplate"], "worker": group["workerTemplate"]}


def engine(template: dict[str, Any]) -> dict[str, Any]:
    (container,) = template["spec"]["containers"]
    assert container["name"] == render.ENGINE_CONTAINER
    return dict(container)


def matches(selector: dict[str, str], labels: dict[str, str]) -> bool:
    return all(labels.get(k) == v for k, v in selector.items())


@pytest.fixture(scope="module", params=AGGREGATED)
def case(request: pytest.FixtureRequest) -> Rendered:
    """A case's engine objects; the routing objects of spec.routing (render.routing, after
    the engines' in the list) are asserted in test_routing.py."""
    r = render_case(request.param)
    routed = routing.manifests(r.service, r.plan)
    assert r.manifests[len(r.manifests) - len(routed) :] == routed
    return dataclasses.replace(r, manifests=r.manifests[: len(r.manifests) - len(routed)])


def test_kinds_and_order(case: Rendered) -> None:
    workload = "LeaderWorkerSet" if case.plan.nodes_per_replica > 1 else "Deployment"
    want = ["PersistentVolumeClaim"] if case.service.spec.storage else []
    want += [workload, "Service", "PodDisruptionBudget", "PodMonitor"]
    assert [m["kind"] for m in case.manifests] == want


def test_every_object_has_the_design_labels_and_namespace(case: Rendered) -> None:
    for m in case.manifests:
        meta = m["metadata"]
        assert meta["namespace"] == case.service.namespace
        assert {k: meta["labels"][k] for k in DESIGN_LABELS} == {
            "app.kubernetes.io/name": "tokenfleet-engine",
            "app.kubernetes.io/instance": case.service.name,
            "app.kubernetes.io/managed-by": "tokenfleet",
            "tokenfleet.dev/llmservice": case.service.name,
        }
        assert "ownerReferences" not in meta  # the controller adds them


def test_names(case: Rendered) -> None:
    kinds = by_kind(case)
    name = case.service.name
    assert kinds["Service"]["metadata"]["name"] == name
    if "LeaderWorkerSet" in kinds:
        # LWS makes a headless Service named after itself; ours already has `name`.
        assert kinds["LeaderWorkerSet"]["metadata"]["name"] == f"{name}-lws"
    else:
        assert kinds["Deployment"]["metadata"]["name"] == name


def test_pod_labels_satisfy_every_selector(case: Rendered) -> None:
    kinds = by_kind(case)
    workload = kinds.get("Deployment") or kinds["LeaderWorkerSet"]
    pods = {role: t["metadata"]["labels"] for role, t in templates(workload).items()}
    for role, labels in pods.items():
        assert labels["tokenfleet.dev/role"] == role
        assert {k: labels[k] for k in DESIGN_LABELS}  # ours survive user labels
        assert labels["tokenfleet.dev/llmservice"] == case.service.name
        assert matches(kinds["PodDisruptionBudget"]["spec"]["selector"]["matchLabels"], labels)
    if workload["kind"] == "Deployment":
        assert matches(workload["spec"]["selector"]["matchLabels"], pods["server"])
    service_selector = kinds["Service"]["spec"]["selector"]
    served = {role for role, labels in pods.items() if matches(service_selector, labels)}
    assert served == ({"server"} if workload["kind"] == "Deployment" else {"leader"})
    monitor = kinds["PodMonitor"]["spec"]["selector"]
    (expr,) = monitor["matchExpressions"]
    scraped = {
        role
        for role, labels in pods.items()
        if matches(monitor["matchLabels"], labels) and labels[expr["key"]] in expr["values"]
    }
    assert scraped == served


def test_gpus_per_pod_and_resource_name(case: Rendered) -> None:
    kinds = by_kind(case)
    workload = kinds.get("Deployment") or kinds["LeaderWorkerSet"]
    per_pod = case.plan.gpus_per_replica // case.plan.nodes_per_replica
    resource = case.service.spec.gpu.resource_name or case.plan.gpu.resource_name
    for template in templates(workload).values():
        res = engine(template)["resources"]
        if case.service.spec.engine.simulate:  # test_simulate.py: no GPU at all
            assert resource not in res["requests"] and resource not in res.get("limits", {})
            continue
        assert res["requests"][resource] == res["limits"][resource] == str(per_pod)
    group = workload["spec"].get("leaderWorkerTemplate")
    if group is not None:
        assert group["size"] == case.plan.nodes_per_replica
        assert group["restartPolicy"] == "RecreateGroupOnPodRestart"
    assert workload["spec"]["replicas"] == case.service.spec.replicas


def test_node_selector_has_the_gpu_label_and_the_users(case: Rendered) -> None:
    kinds = by_kind(case)
    workload = kinds.get("Deployment") or kinds["LeaderWorkerSet"]
    gpu = case.plan.gpu
    for template in templates(workload).values():
        selector = template["spec"].get("nodeSelector", {})
        if case.service.spec.engine.simulate:  # any node: kind has no GPU label
            assert gpu.node_label_key not in selector
            continue
        assert selector[gpu.node_label_key] == gpu.node_label_value
        assert case.service.spec.gpu.node_selector.items() <= selector.items()


def test_probes_ports_and_drain(case: Rendered) -> None:
    kinds = by_kind(case)
    workload = kinds.get("Deployment") or kinds["LeaderWorkerSet"]
    info = ENGINES[case.plan.engine]
    for role, template in templates(workload).items():
        c = engine(template)
        drain = timing.drain_seconds(case.service)
        assert c["lifecycle"]["preStop"]["exec"]["command"] == ["sleep", str(drain)]
        assert template["spec"]["terminationGracePeriodSeconds"] > drain
        assert template["spec"]["enableServiceLinks"] is False
        if role == "worker" and not worker_serves_health(case.plan):  # vLLM --headless ranks
            assert "ports" not in c
            assert not {"startupProbe", "readinessProbe", "livenessProbe"} & c.keys()
            continue
        assert c["ports"] == [{"name": "http", "containerPort": info.port, "protocol": "TCP"}]
        for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
            assert c[probe]["httpGet"] == {"path": "/health", "port": "http"}
        startup = c["startupProbe"]
        budget = startup["failureThreshold"] * startup["periodSeconds"]
        assert budget >= timing.startup_seconds(case.plan) >= 600


def test_shm_and_cache_volumes(case: Rendered) -> None:
    kinds = by_kind(case)
    workload = kinds.get("Deployment") or kinds["LeaderWorkerSet"]
    for template in templates(workload).values():
        volumes = {v["name"]: v for v in template["spec"]["volumes"]}
        assert volumes["shm"]["emptyDir"]["medium"] == "Memory"
        cache = volumes["model-cache"]
        if case.service.spec.storage is not None:
            claim = kinds["PersistentVolumeClaim"]["metadata"]["name"]
            assert cache["persistentVolumeClaim"]["claimName"] == claim
        else:
            assert cache == {"name": "model-cache", "emptyDir": {}}
        mounts = {m["name"]: m["mountPath"] for m in engine(template)["volumeMounts"]}
        assert mounts["shm"] == "/dev/shm"
        assert set(mounts) == set(volumes)


def test_pod_monitor_labels_every_series_with_llmservice_and_namespace(case: Rendered) -> None:
    (endpoint,) = by_kind(case)["PodMonitor"]["spec"]["podMetricsEndpoints"]
    assert endpoint["port"] == "http"
    assert endpoint["path"] == "/metrics"
    targets = {r["targetLabel"]: r for r in endpoint["relabelings"]}
    assert targets["llmservice"]["replacement"] == case.service.name
    assert targets["namespace"]["sourceLabels"] == ["__meta_kubernetes_namespace"]


def test_pdb_allows_one_disruption(case: Rendered) -> None:
    assert by_kind(case)["PodDisruptionBudget"]["spec"]["maxUnavailable"] == 1


def test_service_port(case: Rendered) -> None:
    (port,) = by_kind(case)["Service"]["spec"]["ports"]
    assert (port["name"], port["port"], port["targetPort"]) == ("http", 80, "http")
    host = f"{case.service.name}.{case.service.namespace}.svc.cluster.local"
    assert render.endpoint_url(case.service) == f"http://{host}:80/v1"


def test_rollout_defaults_need_no_spare_gpus() -> None:
    deployment = by_kind(render_case("vllm-8b-l4-minimal"))["Deployment"]
    assert deployment["spec"]["strategy"]["rollingUpdate"] == {"maxSurge": 0, "maxUnavailable": 1}
    lws = by_kind(render_case("vllm-405b-two-nodes"))["LeaderWorkerSet"]
    config = lws["spec"]["rolloutStrategy"]["rollingUpdateConfiguration"]
    assert config == {"maxSurge": 0, "maxUnavailable": 1}


def test_no_monitoring_drops_only_the_pod_monitor() -> None:
    full = render_case("vllm-8b-l4-minimal")
    bare = render_case("vllm-8b-l4-minimal", monitoring_available=False)
    assert [m for m in full.manifests if m["kind"] != "PodMonitor"] == bare.manifests


@pytest.mark.parametrize("name", MULTI_NODE)
def test_multi_node_without_lws_is_refused_with_the_install_hint(name: str) -> None:
    with pytest.raises(UserError, match=r"spec\.gpu=.*LeaderWorkerSet.*kubectl apply"):
        render_case(name, lws_available=False)


@pytest.mark.parametrize("name", SINGLE_NODE)
def test_single_node_needs_no_lws(name: str) -> None:
    assert render_case(name, lws_available=False).manifests


def test_user_env_replaces_ours_by_name_without_duplicates() -> None:
    c = engine(templates(by_kind(render_case("vllm-70b-h100-everything"))["Deployment"])["server"])
    names = [e["name"] for e in c["env"]]
    assert len(names) == len(set(names))
    env = {e["name"]: e for e in c["env"]}
    assert env["HF_HOME"]["value"] == "/data/hf"
    assert env["HF_TOKEN"]["valueFrom"] == {"secretKeyRef": {"name": "hf", "key": "token"}}


def test_user_pod_labels_cannot_take_over_the_selector_label() -> None:
    template = by_kind(render_case("vllm-70b-h100-everything"))["Deployment"]["spec"]["template"]
    assert template["metadata"]["labels"]["tokenfleet.dev/llmservice"] == "llama-70b"
    assert template["metadata"]["labels"]["team"] == "search"


def test_plan_annotations_stay_off_the_pod_template() -> None:
    deployment = by_kind(render_case("vllm-8b-l4-minimal"))["Deployment"]
    assert "tokenfleet.dev/plan" in deployment["metadata"]["annotations"]
    assert "tokenfleet.dev/plan" not in deployment["spec"]["template"]["metadata"]["annotations"]


@pytest.mark.parametrize(
    ("name", "wanted"),
    [
        ("vllm-70b-h100-everything", ["--revision", "--speculative-config"]),
        ("sglang-32b-fp8-kv", ["--speculative-algorithm", "--speculative-num-draft-tokens",
                               "--disable-radix-cache", "--kv-cache-dtype"]),
        ("vllm-405b-two-nodes", ["/mnt/model-weights/llama-405b"]),
        ("vllm-mi300x-s3", ["s3://models/mixtral-8x7b/", "--load-format"]),
    ],
)  # fmt: skip
def test_source_and_engine_options_reach_the_command(name: str, wanted: list[str]) -> None:
    r = render_case(name)
    workload = by_kind(r).get("Deployment") or by_kind(r)["LeaderWorkerSet"]
    args = engine(next(iter(templates(workload).values())))["args"]
    assert all(w in args for w in wanted), args


def test_startup_budget_grows_with_the_weights_a_node_loads() -> None:
    small, big = render_case("vllm-8b-l4-minimal").plan, render_case("vllm-405b-two-nodes").plan
    assert 600 <= timing.startup_seconds(small) < timing.startup_seconds(big) <= 7200
    assert timing.startup_seconds(big) >= 3600  # ~378 GiB per node


@pytest.mark.parametrize(
    ("case_name", "name", "message"),
    [
        ("vllm-8b-l4-minimal", "llama-3.1", r"metadata\.name=llama-3\.1: .*DNS-1035.*llama-3-1$"),
        ("vllm-8b-l4-minimal", "8b-chat", r"e\.g\. llm-8b-chat$"),
        ("vllm-8b-l4-minimal", "a" * 64, r"64 characters is too long for its Service"),
        ("vllm-405b-two-nodes", "a" * 45, r"too long for its LeaderWorkerSet's pod labels .* 44"),
    ],
)
def test_names_that_cannot_name_the_objects_are_refused(
    case_name: str, name: str, message: str
) -> None:
    r = render_case(case_name)
    renamed = r.service.model_copy(update={"metadata": {**r.service.metadata, "name": name}})
    with pytest.raises(render.RenderError, match=message):
        render.all(renamed, r.plan)


def test_longest_allowed_names_render() -> None:
    for case_name, length in (("vllm-8b-l4-minimal", 63), ("vllm-405b-two-nodes", 44)):
        r = render_case(case_name)
        metadata = {**r.service.metadata, "name": "a" * length}
        renamed = r.service.model_copy(update={"metadata": metadata})
        assert render.all(renamed, r.plan)


@pytest.mark.parametrize(("name", "probed"), [("sglang-405b-two-nodes", True),
                                              ("vllm-405b-two-nodes", False)])  # fmt: skip
def test_workers_are_probed_only_where_they_answer_health(name: str, probed: bool) -> None:
    lws = by_kind(render_case(name))["LeaderWorkerSet"]
    worker = engine(templates(lws)["worker"])
    assert ("startupProbe" in worker) is probed


@pytest.mark.parametrize(("surge", "unavailable"), [(0, 0), ("0%", 0), (0, "0%")])
def test_rollout_that_cannot_progress_is_refused(surge: int | str, unavailable: int | str) -> None:
    r = render_case("vllm-8b-l4-minimal")
    rollout = r.service.spec.rollout.model_copy(
        update={"max_surge": surge, "max_unavailable": unavailable}
    )
    spec = r.service.spec.model_copy(update={"rollout": rollout})
    with pytest.raises(render.RenderError, match=r"^spec\.rollout\.maxUnavailable=0.*maxSurge"):
        render.all(r.service.model_copy(update={"spec": spec}), r.plan)
