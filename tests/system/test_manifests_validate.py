"""Every manifest tokenfleet renders is valid Kubernetes, checked by real validators.

Inputs: every LLMService in examples/ and in tests/unit/render/cases/, rendered exactly as
`tokenfleet render` (and the operator) does.

- Core kinds (Deployment, Service, PodDisruptionBudget, PersistentVolumeClaim) go through
  the `kubernetes-validate --strict` command (unknown fields are errors) against
  Kubernetes 1.30 (the oldest release we target) and the newest the package ships.
- kubernetes-validate has no schemas for custom resources. LeaderWorkerSet and PodMonitor
  are checked with jsonschema against schemas transcribed from the projects' Go types
  (tests/data/*.schema.json, every spec field listed, unknown fields rejected), and the
  LeaderWorkerSet's leader and worker pod templates, the bulk of it, are validated by
  kubernetes-validate --strict as core v1 PodTemplate objects.
- InferencePool and HTTPRoute (spec.routing) are checked against their upstream CRDs in
  tests/system/test_routing_validate.py; the routing's core kinds (ServiceAccount,
  RoleBindings, the picker's Deployment and Service) go through
  kubernetes-validate here with the rest.
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from tests.support.kube_validate import VERSIONS, run_validator
from tokenfleet.commands.render import load_documents, render_documents

REPO = Path(__file__).resolve().parents[2]
SCHEMAS = REPO / "tests" / "data"
SOURCES = sorted((REPO / "examples").glob("*.yaml")) + sorted(
    (REPO / "tests" / "unit" / "render" / "cases").glob("*.yaml")
)
CRD_SCHEMAS = {
    "LeaderWorkerSet": "leaderworkerset-v1.schema.json",
    "PodMonitor": "podmonitor-v1.schema.json",
}
UPSTREAM_CRD_KINDS = ("InferencePool", "HTTPRoute")  # test_routing_validate.py


@cache
def rendered() -> list[tuple[str, dict[str, Any]]]:
    """(label, manifest) for every manifest of every source."""
    out = []
    for path in SOURCES:
        source = str(path.relative_to(REPO))
        for r in render_documents(load_documents(str(path)), source):
            for m in r.manifests:
                out.append((f"{source}: {m['kind']}/{m['metadata']['name']}", m))
    assert len(out) >= 4 * len(SOURCES), "every source renders at least four manifests"
    return out


def core_documents() -> list[dict[str, Any]]:
    """Core-kind manifests, plus each LWS pod template as a v1 PodTemplate."""
    docs = []
    for _, m in rendered():
        if m["kind"] == "LeaderWorkerSet":
            group = m["spec"]["leaderWorkerTemplate"]
            for role in ("leader", "worker"):
                meta = {"name": f"{m['metadata']['name']}-{role}"}
                meta["namespace"] = m["metadata"]["namespace"]
                docs.append(
                    {
                        "apiVersion": "v1",
                        "kind": "PodTemplate",
                        "metadata": meta,
                        "template": group[f"{role}Template"],
                    }
                )
        elif m["kind"] not in CRD_SCHEMAS and m["kind"] not in UPSTREAM_CRD_KINDS:
            docs.append(m)
    return docs


@pytest.mark.parametrize("version", VERSIONS)
def test_core_manifests_pass_kubernetes_validate_strict(version: str, tmp_path: Path) -> None:
    docs = core_documents()
    kinds = {d["kind"] for d in docs}
    assert {"Deployment", "Service", "PodDisruptionBudget", "PodTemplate"} <= kinds
    assert "PersistentVolumeClaim" in kinds
    assert {"ServiceAccount", "RoleBinding"} <= kinds  # spec.routing
    code, output = run_validator(docs, version, tmp_path)
    problems = [line for line in output.splitlines() if not line.startswith("INFO")]
    assert code == 0 and not problems, "\n".join(problems)
    passed = [line for line in output.splitlines() if " passed for resource " in line]
    assert len(passed) == len(docs), output  # nothing skipped for want of a schema


def test_the_validator_rejects_an_unknown_field(tmp_path: Path) -> None:
    """The check above can fail: a misspelled pod field is caught in strict mode."""
    deployment = next(m for _, m in rendered() if m["kind"] == "Deployment")
    broken = json.loads(json.dumps(deployment))
    broken["spec"]["template"]["spec"]["enableServiceLink"] = False
    code, output = run_validator([broken], VERSIONS[0], tmp_path)
    assert code != 0
    assert "enableServiceLink" in output


@pytest.mark.parametrize("kind", sorted(CRD_SCHEMAS))
def test_custom_resources_match_their_schemas(kind: str) -> None:
    schema = json.loads((SCHEMAS / CRD_SCHEMAS[kind]).read_text())
    validator = jsonschema.Draft202012Validator(schema)
    checked = 0
    failures = []
    for label, m in rendered():
        if m["kind"] != kind:
            continue
        checked += 1
        for error in validator.iter_errors(m):
            where = ".".join(str(p) for p in error.absolute_path)
            failures.append(f"{label}: {where}: {error.message}")
    assert checked, f"no {kind} rendered"
    assert not failures, "\n".join(failures)


@pytest.mark.parametrize(
    ("kind", "path", "value"),
    [
        ("LeaderWorkerSet", ("spec", "startupPolicy"), "LeaderFirst"),
        ("LeaderWorkerSet", ("spec", "leaderWorkerTemplate", "sizee"), 2),
        ("PodMonitor", ("spec", "podMetricsEndpoints", 0, "interval"), "15 seconds"),
        ("PodMonitor", ("spec", "podMetricsEndpoints", 0, "relabelings", 0, "action"), "rename"),
    ],
)
def test_the_custom_resource_schemas_reject_mistakes(
    kind: str, path: tuple[str | int, ...], value: Any
) -> None:
    schema = json.loads((SCHEMAS / CRD_SCHEMAS[kind]).read_text())
    manifest = json.loads(json.dumps(next(m for _, m in rendered() if m["kind"] == kind)))
    target: Any = manifest
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    assert list(jsonschema.Draft202012Validator(schema).iter_errors(manifest))
