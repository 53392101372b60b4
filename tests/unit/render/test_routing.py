"""render.routing: the InferencePool, the endpoint picker and its RBAC, table-tested.

The picker is a Go program whose parser cannot run here, so its flags and config fields
are checked against its own source at the version the image table pins (llm-d-router
v0.10.0, committed under tests/data/ with a header naming it).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support.render_cases import render_case
from tokenfleet import render
from tokenfleet.engines import engine_info
from tokenfleet.engines.images import PICKER_VERSION, with_overrides
from tokenfleet.errors import UserError
from tokenfleet.render import routing

DATA = Path(__file__).resolve().parents[2] / "data"
ZERO = "vllm-8b-l4-routing-zero"
MULTI = "sglang-405b-two-nodes-routing"
ROUTING_KINDS = ["ServiceAccount", "RoleBinding", "Deployment", "Service", "InferencePool"]


def picker_flags() -> set[str]:
    source = (DATA / f"epp-v{PICKER_VERSION}-options.go.txt").read_text()
    return set(re.findall(r'fs\.\w+Var\(&opts\.\w+, "([a-z0-9-]+)"', source))


def config_fields() -> set[str]:
    source = (DATA / f"epp-v{PICKER_VERSION}-config-types.go.txt").read_text()
    return set(re.findall(r'json:"(\w+)[,"]', source))


def routed(name: str) -> list[dict[str, Any]]:
    r = render_case(name)
    return routing.manifests(r.service, r.plan)


def one(manifests: list[dict[str, Any]], kind: str, suffix: str = "") -> dict[str, Any]:
    (found,) = [
        m for m in manifests if m["kind"] == kind and m["metadata"]["name"].endswith(suffix)
    ]
    return found


def with_routing(name: str, **routing_spec: Any) -> Any:
    r = render_case(name)
    spec = r.service.spec.model_copy(
        update={"routing": r.service.spec.routing.model_copy(update=routing_spec)}
    )
    return r.service.model_copy(update={"spec": spec}), r.plan


@pytest.mark.parametrize(
    ("case", "kinds"),
    [
        ("vllm-8b-l4-minimal", []),
        # Two pickers in this case: a second RoleBinding, for the leader election.
        (ZERO, [*ROUTING_KINDS[:2], "RoleBinding", *ROUTING_KINDS[2:], "HTTPRoute", "PodMonitor"]),
        (MULTI, [*ROUTING_KINDS, "PodMonitor"]),
    ],
)
def test_kinds_and_order(case: str, kinds: list[str]) -> None:
    assert [m["kind"] for m in routed(case)] == kinds


def test_routing_comes_after_the_engines_and_only_when_the_api_is_served() -> None:
    r = render_case(ZERO)
    engines = render.all(r.service, r.plan, routing_available=False)
    assert r.manifests[: len(engines)] == engines  # the first Deployment / Service: engines'
    assert r.manifests[len(engines) :] == routed(ZERO)
    assert not [m for m in engines if m["kind"] in ("InferencePool", "ConfigMap")]


@pytest.mark.parametrize(("case", "role"), [(ZERO, "server"), (MULTI, "leader")])
def test_the_pool_selects_the_engine_pods_that_serve_http_on_their_port(
    case: str, role: str
) -> None:
    r = render_case(case)
    pool = one(routed(case), "InferencePool")
    workload = next(m for m in r.manifests if m["kind"] in ("Deployment", "LeaderWorkerSet"))
    if workload["kind"] == "Deployment":
        templates = [workload["spec"]["template"]]
    else:
        group = workload["spec"]["leaderWorkerTemplate"]
        templates = [group["leaderTemplate"], group["workerTemplate"]]
    match = pool["spec"]["selector"]["matchLabels"]
    selected = [t for t in templates if match.items() <= t["metadata"]["labels"].items()]
    assert [t["metadata"]["labels"]["tokenfleet.dev/role"] for t in selected] == [role]
    assert pool["spec"]["targetPorts"] == [{"number": engine_info(r.plan.engine).port}]
    assert pool["metadata"]["name"] == r.service.name


def test_the_pool_names_the_pickers_service_and_grpc_port() -> None:
    manifests = routed(ZERO)
    ref = one(manifests, "InferencePool")["spec"]["endpointPickerRef"]
    svc = one(manifests, "Service", "-epp")
    port = next(p for p in svc["spec"]["ports"] if p["port"] == ref["port"]["number"])
    assert (ref["kind"], ref["name"]) == ("Service", svc["metadata"]["name"])
    assert port["appProtocol"] == "kubernetes.io/h2c" and port["targetPort"] == "grpc"
    assert ref["failureMode"] == "FailClose"  # the case's choice; the API default is FailOpen


def test_picker_pods_are_selected_by_nothing_of_the_engines() -> None:
    """The engines' Service, PodMonitor, pool and the autoscaler select pods by
    tokenfleet.dev/llmservice: the picker's pods must not carry it."""
    r = render_case(ZERO)
    picker = one(routed(ZERO), "Deployment", "-epp")
    pod_labels = picker["spec"]["template"]["metadata"]["labels"]
    assert "tokenfleet.dev/llmservice" not in pod_labels
    engine_selectors = [
        r.manifests[1]["spec"]["selector"],  # the engines' Service
        one(routed(ZERO), "InferencePool")["spec"]["selector"]["matchLabels"],
    ]
    for selector in engine_selectors:
        assert not selector.items() <= pod_labels.items()
    own = picker["spec"]["selector"]["matchLabels"]
    assert own.items() <= pod_labels.items()
    assert one(routed(ZERO), "Service", "-epp")["spec"]["selector"] == own
    assert one(routed(ZERO), "PodMonitor", "-epp")["spec"]["selector"]["matchLabels"] == own


@pytest.mark.parametrize("case", [ZERO, MULTI])
def test_every_picker_flag_is_one_its_parser_defines(case: str) -> None:
    args = one(routed(case), "Deployment", "-epp")["spec"]["template"]["spec"]["containers"][0]
    flags = {a.removeprefix("--").split("=")[0] for a in args["args"]}
    assert flags <= picker_flags(), flags - picker_flags()
    assert {"pool-name", "pool-namespace", "config-text"} <= flags


def test_the_flag_check_can_fail() -> None:
    assert "pool-name" in picker_flags() and "pool-nam" not in picker_flags()
    assert "flowControl" in config_fields() and "flowcontrol" not in config_fields()


def config_of(manifests: list[dict[str, Any]]) -> dict[str, Any]:
    args = one(manifests, "Deployment", "-epp")["spec"]["template"]["spec"]["containers"][0]
    text = next(a for a in args["args"] if a.startswith("--config-text="))
    return dict(yaml.safe_load(text.removeprefix("--config-text=")))


def keys(value: Any) -> set[str]:
    """Every key of the config outside plugin parameters (those are each plugin's own)."""
    if isinstance(value, dict):
        out = set(value)
        for key, sub in value.items():
            if key != "parameters":
                out |= keys(sub)
        return out
    if isinstance(value, list):
        return set().union(*(keys(v) for v in value)) if value else set()
    return set()


@pytest.mark.parametrize(
    ("case", "flow_control", "engine"),
    [(ZERO, True, None), (MULTI, False, "sglang")],
)
def test_picker_config(case: str, flow_control: bool, engine: str | None) -> None:
    config = config_of(routed(case))
    assert keys(config) - {"apiVersion", "kind"} <= config_fields()
    assert config["apiVersion"] == "llm-d.ai/v1alpha1" and config["kind"] == "EndpointPickerConfig"
    (profile,) = config["schedulingProfiles"]
    weights = {p["pluginRef"]: p["weight"] for p in profile["plugins"]}
    assert weights == {
        "prefix-cache-scorer": 3, "queue-scorer": 2, "kv-cache-utilization-scorer": 2
    }  # fmt: skip
    types = {p["type"] for p in config["plugins"]}
    assert set(weights) <= types  # every profile entry names a declared plugin
    extractor = next(p for p in config["plugins"] if p["type"] == "core-metrics-extractor")
    assert extractor.get("parameters", {}).get("defaultEngine") == engine
    assert ("flowControl" in config.get("featureGates", [])) == flow_control
    if flow_control:
        assert config["flowControl"]["defaultRequestTTL"] == "300s"


def test_a_config_change_rolls_the_picker() -> None:
    service, plan = with_routing(ZERO, queue_ttl_seconds=60)
    changed = routing.manifests(service, plan)
    template = lambda ms: one(ms, "Deployment", "-epp")["spec"]["template"]  # noqa: E731
    assert config_of(changed)["flowControl"]["defaultRequestTTL"] == "60s"
    assert template(changed) != template(routed(ZERO))  # a new pod template: a rollout


@pytest.mark.parametrize(("replicas", "election"), [(1, False), (2, True)])
def test_several_pickers_elect_a_leader(replicas: int, election: bool) -> None:
    service, plan = with_routing(ZERO, picker_replicas=replicas)
    picker = one(routing.manifests(service, plan), "Deployment", "-epp")
    container = picker["spec"]["template"]["spec"]["containers"][0]
    assert ("--ha-enable-leader-election" in container["args"]) == election
    assert picker["spec"]["replicas"] == replicas
    assert picker["spec"]["strategy"]["type"] == "Recreate"
    probes = {container[p]["grpc"]["service"] for p in ("readinessProbe", "livenessProbe")}
    assert probes == ({"liveness", "readiness"} if election else {"inference-extension"})


def test_the_picker_is_bound_to_the_charts_cluster_roles_in_its_namespace_only() -> None:
    manifests = routed(ZERO)
    account = one(manifests, "ServiceAccount")
    assert not [m for m in manifests if m["kind"] in ("Role", "ClusterRole", "ConfigMap")]
    # The case runs two pickers: the leader-election ClusterRole too.
    bindings = [m for m in manifests if m["kind"] == "RoleBinding"]
    assert [b["roleRef"] for b in bindings] == [
        {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role}
        for role in ("tokenfleet-endpoint-picker", "tokenfleet-endpoint-picker-leader-election")
    ]
    for binding in bindings:
        assert binding["metadata"]["namespace"] == "team-a"  # a RoleBinding, not cluster-wide
        assert binding["subjects"] == [
            {"kind": "ServiceAccount", "name": account["metadata"]["name"], "namespace": "team-a"}
        ]
    single = [m for m in routed(MULTI) if m["kind"] == "RoleBinding"]  # one picker: reads only
    assert [b["roleRef"]["name"] for b in single] == ["tokenfleet-endpoint-picker"]
    service, plan = with_routing(MULTI)
    named = routing.manifests(service, plan, picker_role="prod-tokenfleet-endpoint-picker")
    assert one(named, "RoleBinding")["roleRef"]["name"] == "prod-tokenfleet-endpoint-picker"
    pod = one(manifests, "Deployment", "-epp")["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == account["metadata"]["name"]


def test_http_route_attaches_the_pool_to_the_named_gateway_listener() -> None:
    route = one(routed(ZERO), "HTTPRoute")
    assert route["spec"]["parentRefs"] == [
        {"group": "gateway.networking.k8s.io", "kind": "Gateway", "name": "inference-gateway",
         "namespace": "gateways", "sectionName": "http"}
    ]  # fmt: skip
    (rule,) = route["spec"]["rules"]
    assert rule["backendRefs"] == [
        {"group": "inference.networking.k8s.io", "kind": "InferencePool", "name": "chat"}
    ]


def test_picker_image_comes_from_the_table_and_can_be_overridden() -> None:
    r = render_case(ZERO)

    def image(manifests: list[dict[str, Any]]) -> str:
        pod = one(manifests, "Deployment", "-epp")["spec"]["template"]["spec"]
        return str(pod["containers"][0]["image"])

    assert image(routed(ZERO)) == f"ghcr.io/llm-d/llm-d-router-endpoint-picker:v{PICKER_VERSION}"
    table = with_overrides(["epp=mirror.local/epp:v{version}"])
    mirrored = routing.manifests(r.service, r.plan, table)
    assert image(mirrored) == f"mirror.local/epp:v{PICKER_VERSION}"


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("epp:nvidia=x/epp:1", "runs on CPU"),
        ("router=x/epp:1", "use vllm, sglang, epp, pd-sidecar or aws-cli"),
    ],
)
def test_bad_picker_overrides_are_refused(text: str, problem: str) -> None:
    with pytest.raises(UserError, match=problem):
        with_overrides([text])


def test_a_name_too_long_for_the_pickers_service_is_refused_with_the_limit() -> None:
    r = render_case(ZERO)
    for length, ok in ((routing.MAX_NAME, True), (routing.MAX_NAME + 1, False)):
        meta = {**r.service.metadata, "name": "a" * length}
        service = r.service.model_copy(update={"metadata": meta})
        if ok:
            assert render.all(service, r.plan)
        else:
            with pytest.raises(UserError, match=f"metadata.name.*at most {routing.MAX_NAME}"):
                render.all(service, r.plan)
