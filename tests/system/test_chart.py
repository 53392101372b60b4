"""charts/tokenfleet through Helm's Go SDK: lint, render, validate every object, schema.

Core objects go through `kubernetes-validate --strict` (as test_manifests_validate.py does
for the operator's output); ServiceMonitor / PrometheusRule against schemas transcribed from
prometheus-operator's Go types (tests/data); CRDs against apiextensions.k8s.io/v1.
"""

from __future__ import annotations

import json
import typing
from pathlib import Path
from typing import Any

import helm_python as helm
import jsonschema
import pytest
import yaml

from tests.support.chart_render import (
    CHART,
    COMBINATIONS,
    RELEASE,
    chart,
    notes,
    of_kind,
    render,
)
from tests.support.gpu_overlay import NEW_GPU
from tests.support.kube_validate import VERSIONS, run_validator
from tokenfleet.api.crd import CRD_FILE, render_crd_yaml
from tokenfleet.api.gpu import GpuType
from tokenfleet.capacity.overlay import FIELDS

SCHEMAS = Path(__file__).resolve().parents[1] / "data"
GPU_IDS = list(typing.get_args(GpuType))
PEERINGS = {
    "ClusterKopfPeering": "kopf.dev_clusterkopfpeerings.yaml",
    "KopfPeering": "kopf.dev_kopfpeerings.yaml",
}
CUSTOM = {
    "ServiceMonitor": "servicemonitor-v1.schema.json",
    "PrometheusRule": "prometheusrule-v1.schema.json",
}


def test_lint_is_clean_in_strict_mode() -> None:
    for values in COMBINATIONS.values():
        report = helm.lint(str(CHART), values, strict=True, kube_version="v1.30.0")
        problems = [m for m in report["messages"] if m["severity"] >= 2]
        assert not problems and not report["errors"], report


def test_lint_finds_a_broken_template(tmp_path: Path) -> None:
    """The lint above can fail: a template with a syntax error is an error."""
    copy = Path(chart().save_dir(tmp_path))
    (copy / "templates" / "broken.yaml").write_text("{{ if }}\n")
    report = helm.lint(str(copy), strict=True)
    assert report["errors"] or any(m["severity"] == 3 for m in report["messages"])


@pytest.mark.parametrize("combination", sorted(COMBINATIONS))
@pytest.mark.parametrize("version", VERSIONS)
def test_rendered_objects_pass_kubernetes_validate_strict(
    combination: str, version: str, tmp_path: Path
) -> None:
    docs = [d for d in render(COMBINATIONS[combination]) if d["kind"] not in {*CUSTOM, *PEERINGS}]
    code, output = run_validator(docs, version, tmp_path)
    problems = [line for line in output.splitlines() if not line.startswith("INFO")]
    assert code == 0 and not problems, "\n".join(problems)
    passed = [line for line in output.splitlines() if " passed for resource " in line]
    assert len(passed) == len(docs), output


@pytest.mark.parametrize("kind", sorted(CUSTOM))
def test_monitoring_objects_match_their_schemas(kind: str) -> None:
    validator = jsonschema.Draft202012Validator(json.loads((SCHEMAS / CUSTOM[kind]).read_text()))
    (doc,) = of_kind(render(COMBINATIONS["everything"]), kind)
    assert [e.message for e in validator.iter_errors(doc)] == []
    broken = json.loads(json.dumps(doc))
    broken["spec"]["bogus"] = 1
    assert list(validator.iter_errors(broken))


@pytest.mark.parametrize("combination", sorted(COMBINATIONS))
def test_peering_objects_match_the_kopf_crds(combination: str) -> None:
    """kubernetes-validate knows no kopf.dev kinds: check them against the chart's CRDs."""
    for doc in render(COMBINATIONS[combination]):
        if doc["kind"] not in PEERINGS:
            continue
        crd = yaml.safe_load((CHART / "crds" / PEERINGS[doc["kind"]]).read_text())
        assert doc["apiVersion"] == f"{crd['spec']['group']}/v1"
        namespaced = crd["spec"]["scope"] == "Namespaced"
        assert ("namespace" in doc["metadata"]) == namespaced
        schema = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
        jsonschema.validate(doc, schema)
        assert set(doc) == {"apiVersion", "kind", "metadata"}


def test_peering_object_per_scope() -> None:
    (cluster,) = of_kind(render(), "ClusterKopfPeering")
    assert cluster["metadata"]["name"] == "tokenfleet"
    namespaced = of_kind(render({"watchNamespaces": ["a", "b"]}), "KopfPeering")
    assert {p["metadata"]["namespace"] for p in namespaced} == {"a", "b"}
    assert not of_kind(render(COMBINATIONS["namespaced-standalone"]), "KopfPeering")


def test_without_peering_an_upgrade_never_runs_two_operators() -> None:
    (standalone,) = of_kind(render(COMBINATIONS["namespaced-standalone"]), "Deployment")
    assert standalone["spec"]["strategy"] == {"type": "Recreate"}
    (peered,) = of_kind(render(), "Deployment")
    assert "strategy" not in peered["spec"]  # RollingUpdate: the peering picks one


def test_defaults_need_no_prometheus_operator() -> None:
    kinds = {d["kind"] for d in render()}
    assert kinds == {
        "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Deployment", "Service",
        "ClusterKopfPeering",
    }  # fmt: skip


def test_operator_deployment_is_hardened() -> None:
    (deploy,) = of_kind(render(), "Deployment")
    pod = deploy["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert deploy["spec"]["replicas"] == 2
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    sc = container["securityContext"]
    assert sc["readOnlyRootFilesystem"] is True
    assert sc["allowPrivilegeEscalation"] is False
    assert sc["capabilities"] == {"drop": ["ALL"]}
    assert container["resources"]["requests"] and container["resources"]["limits"]
    for probe in ("livenessProbe", "readinessProbe"):
        assert container[probe]["httpGet"]["path"] == "/healthz"
    assert "--peering=tokenfleet" in container["args"]
    assert "--all-namespaces" in container["args"]


def test_values_become_operator_flags() -> None:
    docs = render(COMBINATIONS["everything"])
    (deploy,) = of_kind(docs, "Deployment")
    args = deploy["spec"]["template"]["spec"]["containers"][0]["args"]
    assert "--prometheus-url=http://prometheus-operated.monitoring:9090" in args
    assert "--allow-prometheus=http://thanos-query.monitoring:9090" in args
    assert "--engine-image=vllm:amd=mirror.local/vllm-rocm:v{version}" in args
    assert "--gpu-catalog=/etc/tokenfleet/gpu-catalog.yaml" in args
    assert "--log-level=debug" in args
    (catalog,) = [
        c for c in of_kind(docs, "ConfigMap") if c["metadata"]["name"].endswith("-catalog")
    ]
    overlay = yaml.safe_load(catalog["data"]["gpu-catalog.yaml"])
    from tokenfleet.capacity.overlay import parse_overlay

    parsed = parse_overlay(overlay)  # what the operator reads at start-up
    assert parsed["h100-sxm"].price_per_hour == 2.49
    assert parsed["rtx-pro-6000"].memory_gib == NEW_GPU["memoryGib"]


def test_the_operator_parses_the_rendered_flags() -> None:
    """Every flag the chart passes is one `tokenfleet operator` accepts."""
    import argparse

    from tokenfleet.commands import operator

    (deploy,) = of_kind(render(COMBINATIONS["everything"]), "Deployment")
    parser = argparse.ArgumentParser()
    operator.add_arguments(parser, "operator")
    args = parser.parse_args(deploy["spec"]["template"]["spec"]["containers"][0]["args"])
    assert args.engine_image == ["vllm:amd=mirror.local/vllm-rocm:v{version}"]
    (deploy,) = of_kind(render(COMBINATIONS["namespaced-standalone"]), "Deployment")
    args = parser.parse_args(deploy["spec"]["template"]["spec"]["containers"][0]["args"])
    assert args.standalone and args.namespace == ["team-a", "team-b"]


def test_namespaced_mode_has_no_cluster_wide_grant() -> None:
    """The only ClusterRoles are the endpoint picker's, which grant nothing until the
    operator binds them in a watched namespace; nothing is bound cluster-wide."""
    docs = render(COMBINATIONS["namespaced-standalone"])
    assert not of_kind(docs, "ClusterRoleBinding")
    picker = f"{RELEASE}-tokenfleet-endpoint-picker"
    names = {r["metadata"]["name"] for r in of_kind(docs, "ClusterRole")}
    assert names == {picker, f"{picker}-leader-election"}
    assert {r["metadata"]["namespace"] for r in of_kind(docs, "Role")} == {"team-a", "team-b"}


def operator_role(docs: list[dict[str, Any]], kind: str = "ClusterRole") -> dict[str, Any]:
    """The operator's own (Cluster)Role: the first, when there is one per namespace."""
    return next(r for r in of_kind(docs, kind) if r["metadata"]["name"] == f"{RELEASE}-tokenfleet")


WRITES = {"create", "update", "patch", "delete", "deletecollection", "*"}
ROUTING_OWN = {"configmaps", "serviceaccounts", "roles", "rolebindings", "leases"}


@pytest.mark.parametrize("values", [{}, COMBINATIONS["everything"], {"routingNamespaces": ["r"]}])
def test_the_operators_cluster_role_writes_no_identity_config_or_lease(
    values: dict[str, Any],
) -> None:
    """Issue 30: routing had widened the operator's ClusterRole to write ConfigMaps,
    ServiceAccounts, Roles, RoleBindings and Leases in every namespace (kube-system's too)."""
    for rule in operator_role(render(values))["rules"]:
        if set(rule["resources"]) & ROUTING_OWN:
            assert not set(rule["verbs"]) & WRITES, rule


def test_routing_is_granted_per_namespace_by_binding_the_pickers_cluster_roles() -> None:
    from tokenfleet.render.routing import LEADER_ELECTION_RULES, PICKER_RULES

    docs = render({"routingNamespaces": ["team-r"]})
    picker = f"{RELEASE}-tokenfleet-endpoint-picker"
    roles = {r["metadata"]["name"]: r for r in of_kind(docs, "ClusterRole")}
    assert roles[picker]["rules"] == [dict(r) for r in PICKER_RULES]
    assert roles[f"{picker}-leader-election"]["rules"] == [dict(r) for r in LEADER_ELECTION_RULES]
    (routing,) = of_kind(docs, "Role")
    (binding,) = of_kind(docs, "RoleBinding")
    assert routing["metadata"]["namespace"] == binding["metadata"]["namespace"] == "team-r"
    assert binding["roleRef"]["name"] == routing["metadata"]["name"]
    bind = [r for r in routing["rules"] if "bind" in r["verbs"]]
    assert bind == [
        {"apiGroups": ["rbac.authorization.k8s.io"], "resources": ["clusterroles"],
         "verbs": ["bind"], "resourceNames": [picker, f"{picker}-leader-election"]}
    ]  # fmt: skip
    (deploy,) = of_kind(docs, "Deployment")
    assert (
        f"--picker-cluster-role={picker}"
        in deploy["spec"]["template"]["spec"]["containers"][0]["args"]
    )
    # Cluster-wide with no routingNamespaces: routing is granted nowhere.
    assert not of_kind(render(), "Role")


def test_roles_are_the_rules_file() -> None:
    """tests/integration/test_rbac.py checks files/rbac-rules.yaml against the operator's
    requests; the rendered roles must be exactly those rules."""
    rules = yaml.safe_load((CHART / "files" / "rbac-rules.yaml").read_text())
    cluster_role = operator_role(render())
    assert cluster_role["rules"] == rules["namespaced"] + rules["peering"]["cluster"]
    for role in of_kind(render(COMBINATIONS["namespaced-standalone"]), "Role"):
        if role["metadata"]["name"].endswith("-routing"):
            assert role["rules"][:-1] == rules["routing"]  # and bind (the test above)
        else:
            assert role["rules"] == rules["namespaced"]  # standalone: no peering
    role = operator_role(render({"watchNamespaces": ["a", "b"]}), "Role")
    assert role["rules"] == rules["namespaced"] + rules["peering"]["namespaced"]


def test_no_access_to_secrets() -> None:
    for values in COMBINATIONS.values():
        for role in of_kind(render(values), "ClusterRole") + of_kind(render(values), "Role"):
            for rule in role["rules"]:
                assert "secrets" not in rule["resources"] and "*" not in rule["verbs"]


def test_chart_crds_are_the_generated_and_kopf_ones() -> None:
    names = {}
    for path in sorted((CHART / "crds").glob("*.yaml")):
        doc = yaml.safe_load(path.read_text())
        names[doc["metadata"]["name"]] = doc
    assert set(names) == {
        "llmservices.tokenfleet.dev",
        "kopfpeerings.kopf.dev",
        "clusterkopfpeerings.kopf.dev",
    }
    assert (CHART / "crds" / CRD_FILE).read_text() == render_crd_yaml()


def test_a_new_gpu_type_joins_the_templated_crd() -> None:
    values = {"gpuCatalog": {"gpus": {"rtx-pro-6000": NEW_GPU}}}
    with pytest.raises(helm.HelmError, match=r"set crds\.templated=true"):
        render(values)  # the static CRD would reject every LLMService on it
    templated = of_kind(render({**values, "crds": {"templated": True}}), "CustomResourceDefinition")
    (crd,) = [c for c in templated if c["metadata"]["name"] == "llmservices.tokenfleet.dev"]
    schema = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    gpu = schema["properties"]["spec"]["properties"]["gpu"]["properties"]
    assert gpu["type"]["enum"] == ["auto", *GPU_IDS, "rtx-pro-6000"]
    # ... and the types spec.gpu.type auto may choose among.
    assert gpu["candidates"]["items"]["properties"]["type"]["enum"] == [*GPU_IDS, "rtx-pro-6000"]


def test_templated_crds_equal_the_crds_folder_and_are_kept() -> None:
    templated = of_kind(render({"crds": {"templated": True}}), "CustomResourceDefinition")
    files = [yaml.safe_load(p.read_text()) for p in sorted((CHART / "crds").glob("*.yaml"))]
    assert sorted(c["metadata"]["name"] for c in templated) == sorted(
        f["metadata"]["name"] for f in files
    )
    for crd in templated:
        (file,) = [f for f in files if f["metadata"]["name"] == crd["metadata"]["name"]]
        assert crd["spec"] == file["spec"]
        assert crd["metadata"]["annotations"]["helm.sh/resource-policy"] == "keep"
    assert not of_kind(render(), "CustomResourceDefinition")


@pytest.mark.parametrize(
    ("values", "needle"),
    [
        ({"replicaCount": 0}, "replicaCount"),
        ({"logLevel": "loud"}, "logLevel"),
        ({"watchNamespaces": ["Team_A"]}, "watchNamespaces"),
        ({"prometheusUrl": "prometheus:9090"}, "prometheusUrl"),
        ({"engineImages": {"trtllm": "x"}}, "trtllm"),
        ({"gpuCatalog": {"gpus": {"l4": {"pricePerHour": -1}}}}, "pricePerHour"),
        ({"gpuCatalog": {"gpus": {"RTX_9090": {}}}}, "RTX_9090"),
        ({"gpuCatalog": {"gpus": {"l4": {"tflops": 1}}}}, "tflops"),
        ({"prometheusRule": {"ttft": {"thresholdSeconds": "2.5"}}}, "thresholdSeconds"),
        ({"prometheusRule": {"ttft": {"objective": 1.5}}}, "objective"),
        ({"serviceMonitor": {"interval": "soon"}}, "interval"),
        ({"resources": {"requests": {"cpu": "lots"}}}, "cpu"),
        ({"unknownValue": 1}, "unknownValue"),
    ],
)
def test_values_schema_rejects_bad_values(values: dict[str, Any], needle: str) -> None:
    with pytest.raises(helm.HelmError) as caught:
        chart().render(values, name="tf", namespace="ns")
    assert needle in str(caught.value)


def test_more_replicas_without_peering_is_refused() -> None:
    with pytest.raises(helm.HelmError, match=r"needs peering\.enabled=true"):
        render({"peering": {"enabled": False}})


def test_every_value_is_in_the_schema() -> None:
    schema = chart().schema
    assert schema is not None

    def walk(values: Any, node: dict[str, Any], path: str) -> None:
        if isinstance(values, dict) and "properties" in node:
            for key, value in values.items():
                assert key in node["properties"], f"{path}{key} is not in values.schema.json"
                walk(value, node["properties"][key], f"{path}{key}.")

    walk(chart().values, schema, "")
    gpus = schema["properties"]["gpuCatalog"]["properties"]["gpus"]["additionalProperties"]
    assert set(gpus["properties"]) == set(FIELDS)  # the overlay's fields, no more, no less


def test_notes_say_what_to_do_next() -> None:
    text = notes()
    assert "rollout status" in text and "kubectl apply -f" in text
    assert "prometheusUrl" in text  # autoscaling holds without it
    assert "--skip-crds" in notes({"crds": {"templated": True}})
