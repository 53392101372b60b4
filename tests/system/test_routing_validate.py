"""The routing objects (spec.routing) against the upstream CRDs that define them.

InferencePool: kubernetes-sigs/gateway-api-inference-extension v1.6.0's CRD, HTTPRoute:
kubernetes-sigs/gateway-api v1.6.1's (tests/data/*.crd.yaml, headers say how they were
taken). Each rendered object goes through what the API server would do with it, offline:
defaulting, OpenAPI validation with unknown fields rejected, and every CEL rule
(crd_checker.CrdValidator, cel-python). The core kinds of the routing (ServiceAccount,
RoleBindings, the picker's Deployment and Service) are checked by
kubernetes-validate --strict in test_manifests_validate.py.
"""

from __future__ import annotations

import copy
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support.crd_checker import CrdValidator
from tokenfleet.commands.render import load_documents, render_documents

REPO = Path(__file__).resolve().parents[2]
DATA = REPO / "tests" / "data"
SOURCES = sorted((REPO / "examples").glob("*.yaml")) + sorted(
    (REPO / "tests" / "unit" / "render" / "cases").glob("*.yaml")
)
CRDS = {"InferencePool": "inferencepool-v1.crd.yaml", "HTTPRoute": "httproute-v1.crd.yaml"}


@cache
def validator(kind: str) -> CrdValidator:
    crd = yaml.safe_load((DATA / CRDS[kind]).read_text())
    (version,) = [v for v in crd["spec"]["versions"] if v.get("served")][:1]
    assert version["name"] == "v1"
    return CrdValidator(crd)


@cache
def rendered(kind: str) -> list[tuple[str, dict[str, Any]]]:
    out = []
    for path in SOURCES:
        source = str(path.relative_to(REPO))
        for r in render_documents(load_documents(str(path)), source):
            named = [(f"{source}: {m['metadata']['name']}", m) for m in r.manifests]
            out += [(label, m) for label, m in named if m["kind"] == kind]
    return out


@pytest.mark.parametrize("kind", sorted(CRDS))
def test_rendered_objects_pass_the_upstream_crd(kind: str) -> None:
    objects = rendered(kind)
    assert objects, f"no {kind} rendered from examples/ or the render cases"
    failures = [f"{label}: {e}" for label, m in objects for e in validator(kind).errors(m)]
    assert not failures, "\n".join(failures)
    group = yaml.safe_load((DATA / CRDS[kind]).read_text())["spec"]["group"]
    assert {m["apiVersion"] for _, m in objects} == {f"{group}/v1"}


@pytest.mark.parametrize(
    ("kind", "path", "value", "needle"),
    [
        ("InferencePool", ("spec", "targetPorts"), [], "targetPorts"),
        ("InferencePool", ("spec", "targetPorts"), [{"number": 8000}, {"number": 8000}], "unique"),
        ("InferencePool", ("spec", "endpointPickerRef", "port"), None, "port is required"),
        ("InferencePool", ("spec", "selector", "matchLabels"), {}, "matchLabels"),
        ("InferencePool", ("spec", "endpointPickerRef", "failureMode"), "Open", "failureMode"),
        ("HTTPRoute", ("spec", "rules", 0, "backendRefs", 0, "weight"), -1, "weight"),
        ("HTTPRoute", ("spec", "parentRefs", 0, "nam"), "gw", "nam"),
    ],
)
def test_the_upstream_crds_reject_mistakes(
    kind: str, path: tuple[str | int, ...], value: Any, needle: str
) -> None:
    """The check above can fail: a broken copy of a rendered object is refused."""
    manifest = copy.deepcopy(rendered(kind)[0][1])
    target: Any = manifest
    for key in path[:-1]:
        target = target[key]
    if value is None:
        del target[path[-1]]
    else:
        target[path[-1]] = value
    errors = validator(kind).errors(manifest)
    assert any(needle in e for e in errors), errors
