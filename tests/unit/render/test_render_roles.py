"""Disaggregated serving in the render: a workload per role, the engines' role flags, llm-d's
routing sidecar and the picker's disaggregation profile, checked against the sources that
decide them (the Go files of llm-d-router v0.10.0 under tests/data, the engines' own config
in tests/system/test_engine_parsers.py), and the refusals that keep a plan the cluster cannot
run from being half-created."""

from __future__ import annotations

import dataclasses
import itertools
import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support.render_cases import render_case
from tokenfleet import render
from tokenfleet.api import parse_llmservice
from tokenfleet.commands.render import Rendered
from tokenfleet.engines.images import PICKER_VERSION
from tokenfleet.errors import UserError
from tokenfleet.render import roles, routing
from tokenfleet.render.meta import LLMD_ROLE_LABEL, SERVING_ROLE_LABEL

DATA = Path(__file__).resolve().parents[2] / "data"
VLLM, SGLANG = "vllm-70b-pd", "sglang-32b-pd"
SIDECAR_GO = (DATA / f"llm-d-router-v{PICKER_VERSION}-sidecar.go.txt").read_text()
PLUGINS_GO = (DATA / f"llm-d-router-v{PICKER_VERSION}-pd-plugins.go.txt").read_text()


def workloads(r: Rendered) -> dict[str, dict[str, Any]]:
    out = {}
    for m in r.manifests:
        labels = m["metadata"]["labels"]
        if m["kind"] == "Deployment" and labels["app.kubernetes.io/name"] == "tokenfleet-engine":
            out[m["spec"]["template"]["metadata"]["labels"][SERVING_ROLE_LABEL]] = m
    return out


def container(template: dict[str, Any], name: str) -> dict[str, Any]:
    spec = template["spec"]
    (found,) = [c for c in spec["containers"] + spec.get("initContainers", []) if c["name"] == name]
    return dict(found)


def one(r: Rendered, kind: str, name: str) -> dict[str, Any]:
    (found,) = [m for m in r.manifests if m["kind"] == kind and m["metadata"]["name"] == name]
    return found


@pytest.fixture(scope="module", params=[VLLM, SGLANG])
def case(request: pytest.FixtureRequest) -> Rendered:
    return render_case(request.param)


def test_a_workload_per_role_decode_first(case: Rendered) -> None:
    name = case.service.name
    kinds = [(m["kind"], m["metadata"]["name"]) for m in case.manifests]
    assert kinds[:2] == [("Deployment", f"{name}-decode"), ("Deployment", f"{name}-prefill")]
    assert ("Deployment", name) not in kinds  # no aggregated workload beside them
    w = workloads(case)
    for role, workload in w.items():
        selector = workload["spec"]["selector"]["matchLabels"]
        pods = workload["spec"]["template"]["metadata"]["labels"]
        assert selector.items() <= pods.items()
        assert pods[LLMD_ROLE_LABEL] == role  # the picker's prefill-filter / decode-filter
        other = w["prefill" if role == "decode" else "decode"]
        other_pods = other["spec"]["template"]["metadata"]["labels"]
        assert not selector.items() <= other_pods.items()  # each selects its own pods only


def test_each_role_runs_its_own_plan(case: Rendered) -> None:
    s = case.plan.serving
    assert s is not None and s.roles is not None
    prefill, decode = s.roles
    w = workloads(case)
    for role, workload in (prefill, w["prefill"]), (decode, w["decode"]):
        args = container(workload["spec"]["template"], "engine")["args"]
        tp = "--tensor-parallel-size" if case.plan.engine == "vllm" else "--tp-size"
        assert args[args.index(tp) + 1] == str(role.plan.tensor_parallel_size)
        seats = "--max-num-seqs" if case.plan.engine == "vllm" else "--max-running-requests"
        assert args[args.index(seats) + 1] == str(role.plan.max_num_seqs)


def test_decode_pods_put_the_routing_sidecar_on_the_pools_port(case: Rendered) -> None:
    w = workloads(case)
    pool = one(case, "InferencePool", case.service.name)
    (target,) = pool["spec"]["targetPorts"]
    decode = w["decode"]["spec"]["template"]
    sidecar = container(decode, routing.sidecar.SIDECAR_CONTAINER)
    engine = container(decode, "engine")
    assert sidecar["restartPolicy"] == "Always"  # a native sidecar
    assert sidecar["ports"] == [{"name": "http", "containerPort": target["number"],
                                 "protocol": "TCP"}]  # fmt: skip
    engine_port = {p["name"]: p["containerPort"] for p in engine["ports"]}["engine"]
    assert f"--model-server-port={engine_port}" in sidecar["args"]
    assert f"--port={target['number']}" in sidecar["args"]
    for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
        assert engine[probe]["httpGet"]["port"] == "engine"
    # The prefill engine itself answers on the pool's port; no sidecar there.
    prefill = w["prefill"]["spec"]["template"]
    assert not prefill["spec"].get("initContainers")
    ports = {p["name"]: p["containerPort"] for p in container(prefill, "engine")["ports"]}
    assert ports["http"] == target["number"]
    # Clients of the plain Service reach decode pods' sidecars only.
    service = one(case, "Service", case.service.name)
    assert service["spec"]["selector"][SERVING_ROLE_LABEL] == "decode"


def sidecar_flags() -> set[str]:
    constants = dict(re.findall(r'^\s+(\w+)\s+= "([a-z0-9-]+)"$', SIDECAR_GO, re.M))
    bound = re.findall(r"fs\.\w+Var\(&opts\.\w+, (\w+),", SIDECAR_GO)
    return {constants[name] for name in bound if name in constants}


def test_sidecar_flags_and_connector_are_its_parsers(case: Rendered) -> None:
    decode = workloads(case)["decode"]["spec"]["template"]
    args = container(decode, routing.sidecar.SIDECAR_CONTAINER)["args"]
    flags = {a.removeprefix("--").split("=")[0] for a in args}
    assert flags <= sidecar_flags(), flags - sidecar_flags()
    connector = next(a.split("=")[1] for a in args if a.startswith("--kv-connector="))
    assert f'= "{connector}"' in SIDECAR_GO.split("// ===== pkg/sidecar/constants/constants.go")[1]
    assert "--enable-ssrf-protection=true" in args  # prefill addresses from its pool only
    pool = f"--inference-pool={case.service.namespace}/{case.service.name}"
    assert pool in args


def test_the_flag_check_can_fail() -> None:
    assert {"kv-connector", "model-server-port", "secure-proxy"} <= sidecar_flags()
    assert "kv_connector" not in sidecar_flags() and "vllm-port-x" not in sidecar_flags()


def test_only_the_sidecar_holds_an_api_token(case: Rendered) -> None:
    """Its SSRF allowlist watches the pool and its pods; the engine needs no API access."""
    decode = workloads(case)["decode"]["spec"]["template"]
    name = f"{case.service.name}{routing.sidecar.SIDECAR_SUFFIX}"
    assert decode["spec"]["serviceAccountName"] == name
    assert decode["spec"]["automountServiceAccountToken"] is False
    sidecar = container(decode, routing.sidecar.SIDECAR_CONTAINER)
    engine = container(decode, "engine")
    token = routing.sidecar.TOKEN_VOLUME
    assert [m["name"] for m in sidecar["volumeMounts"]] == [token]
    assert token not in {m["name"] for m in engine["volumeMounts"]}
    binding = one(case, "RoleBinding", name)
    assert binding["subjects"][0]["name"] == name
    assert binding["roleRef"]["name"] == routing.DEFAULT_PICKER_ROLE  # pods + pools, read-only
    assert one(case, "ServiceAccount", name)["metadata"]["labels"]["tokenfleet.dev/llmservice"]


def kv_config(args: list[str]) -> dict[str, Any]:
    return dict(json.loads(args[args.index("--kv-transfer-config") + 1]))


def test_vllm_roles_are_nixl_producer_and_consumer_with_recompute() -> None:
    w = workloads(render_case(VLLM))
    prefill = container(w["prefill"]["spec"]["template"], "engine")
    decode = container(w["decode"]["spec"]["template"], "engine")
    assert kv_config(prefill["args"]) == {"kv_connector": "NixlConnector",
                                          "kv_role": "kv_producer"}  # fmt: skip
    assert kv_config(decode["args"]) == {"kv_connector": "NixlConnector", "kv_role": "kv_consumer",
                                         "kv_load_failure_policy": "recompute"}  # fmt: skip
    for engine in (prefill, decode):
        (host,) = [e for e in engine["env"] if e["name"] == "VLLM_NIXL_SIDE_CHANNEL_HOST"]
        assert host["valueFrom"] == {"fieldRef": {"fieldPath": "status.podIP"}}
        assert {"name": "nixl", "containerPort": 5600, "protocol": "TCP"} in engine["ports"]


def test_sglang_roles_carry_mode_backend_and_bootstrap_port() -> None:
    w = workloads(render_case(SGLANG))
    prefill = container(w["prefill"]["spec"]["template"], "engine")["args"]
    decode = container(w["decode"]["spec"]["template"], "engine")["args"]
    pairs = lambda a: dict(itertools.pairwise(a))  # noqa: E731
    assert pairs(prefill)["--disaggregation-mode"] == "prefill"
    assert pairs(decode)["--disaggregation-mode"] == "decode"
    assert pairs(prefill)["--disaggregation-transfer-backend"] == "mooncake"
    assert pairs(prefill)["--disaggregation-bootstrap-port"] == "8998"  # the sidecar's default
    assert "--disaggregation-bootstrap-port" not in decode


def picker_config(r: Rendered) -> dict[str, Any]:
    picker = one(r, "Deployment", f"{r.service.name}-epp")
    args = picker["spec"]["template"]["spec"]["containers"][0]["args"]
    text = next(a for a in args if a.startswith("--config-text="))
    return dict(yaml.safe_load(text.removeprefix("--config-text=")))


def registered_types() -> set[str]:
    """Plugin types the v0.10.0 runner registers: each constant X = "type" whose X the
    runner passes to a Register* call."""
    constants = dict(re.findall(r"(\w+Type)\s*=\s*\"([a-z0-9-]+)\"", PLUGINS_GO))
    calls = re.findall(r"Register\w*\(\s*\w+\.(\w+Type)\b", PLUGINS_GO)
    return {constants[c] for c in calls if c in constants}


def test_picker_runs_the_disaggregation_profile(case: Rendered) -> None:
    config = picker_config(case)
    types = [p["type"] for p in config["plugins"]]
    pd = {"disagg-profile-handler", "prefix-based-pd-decider", "prefill-filter",
          "decode-filter", "max-score-picker", "approx-prefix-cache-producer"}  # fmt: skip
    assert pd <= set(types) <= registered_types() | {"metrics-data-source",
                                                     "core-metrics-extractor", "queue-scorer",
                                                     "kv-cache-utilization-scorer",
                                                     "prefix-cache-scorer"}  # fmt: skip
    handler = next(p for p in config["plugins"] if p["type"] == "disagg-profile-handler")
    assert handler["parameters"] == {"deciders": {"prefill": "prefix-based-pd-decider"}}
    assert 'json:"deciders"' in PLUGINS_GO and 'json:"prefill,omitempty"' in PLUGINS_GO
    decider = next(p for p in config["plugins"] if p["type"] == "prefix-based-pd-decider")
    (key,) = decider["parameters"]
    assert f'json:"{key}"' in PLUGINS_GO
    profiles = {p["name"]: [r["pluginRef"] for r in p["plugins"]]
                for p in config["schedulingProfiles"]}  # fmt: skip
    assert set(profiles) == {"prefill", "decode"}  # the handler's default profile names
    assert profiles["prefill"][0] == "prefill-filter" and profiles["decode"][0] == "decode-filter"
    for refs in profiles.values():
        assert set(refs) <= set(types)  # every entry names a declared plugin


def test_the_plugin_check_can_fail() -> None:
    assert {"prefill-filter", "disagg-profile-handler"} <= registered_types()
    assert "pd-profile-handler-x" not in registered_types()


def test_prefill_replicas_follow_the_planners_ratio() -> None:
    r = render_case(VLLM)
    d = r.plan.serving.disaggregated  # type: ignore[union-attr]
    assert d is not None
    w = workloads(r)
    decode = w["decode"]["spec"]["replicas"]
    assert decode == r.service.spec.replicas  # the scale subresource's replicas
    assert w["prefill"]["spec"]["replicas"] == -(-decode * d.prefill_per_decode // 1)
    assert roles.prefill_replicas(r.service, r.plan, 0) == 0  # both pools at zero together
    fixed = render_case(SGLANG)  # spec.serving.prefillReplicas: 2
    assert workloads(fixed)["prefill"]["spec"]["replicas"] == 2


def with_spec(name: str, **updates: Any) -> Any:
    r = render_case(name)
    body = r.service.to_dict()
    for path, value in updates.items():
        node = body["spec"]
        *parents, leaf = path.split(".")
        for key in parents:
            node = node.setdefault(key, {})
        node[leaf] = value
    return parse_llmservice(body), r.plan


def test_refused_without_the_inference_pool_api() -> None:
    r = render_case(VLLM)
    with pytest.raises(UserError) as e:
        render.all(r.service, r.plan, routing_available=False)
    assert e.value.field == "spec.serving.mode" and "InferencePool" in e.value.problem


def test_refused_with_a_service_account_of_the_users() -> None:
    service, plan = with_spec(VLLM, **{"podTemplate.serviceAccountName": "mine"})
    with pytest.raises(UserError) as e:
        render.all(service, plan)
    assert e.value.field == "spec.podTemplate.serviceAccountName" and e.value.value == "mine"
    assert "remove spec.podTemplate.serviceAccountName" in e.value.fix


def test_a_long_name_leaves_room_for_the_role_in_a_leader_worker_set() -> None:
    r = render_case(VLLM)
    decode = r.plan.serving.roles[1].plan  # type: ignore[union-attr]
    multi = dataclasses.replace(decode, nodes_per_replica=2)
    limit = render.MAX_NAME_MULTI_NODE - len("-prefill")
    render.check_name(r.service, multi, len("-prefill"))  # the case's short name fits
    long = r.service.model_copy(update={"metadata": {**r.service.metadata,
                                                     "name": "x" * (limit + 1)}})  # fmt: skip
    with pytest.raises(UserError) as e:
        render.check_name(long, multi, len("-prefill"))
    assert f"at most {limit}" in e.value.problem
