"""spec.routing.gateway carries the Gateway API's own formats (issue 30: `Bad_NS!` and a
newline in namespace / sectionName passed the schema and failed only at the HTTPRoute's
apply). The patterns and bounds are compared with the parentRefs of the upstream HTTPRoute
CRD (tests/data/httproute-v1.crd.yaml, gateway-api v1.6.1), field by field, and a bad value
is refused by parse_llmservice with the field named."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from tokenfleet.api import parse_llmservice
from tokenfleet.api.crd import build_crd

ROOT = Path(__file__).resolve().parents[3]
HTTPROUTE = ROOT / "tests" / "data" / "httproute-v1.crd.yaml"
EXAMPLE = ROOT / "examples" / "llama-3.1-8b-l4-scale-to-zero.yaml"
BOUNDS = ("pattern", "minLength", "maxLength")


def upstream_parent_ref() -> dict[str, Any]:
    crd = yaml.safe_load(HTTPROUTE.read_text())
    (v1,) = [v for v in crd["spec"]["versions"] if v["name"] == "v1"]
    spec = v1["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]
    return dict(spec["parentRefs"]["items"]["properties"])


def ours() -> dict[str, Any]:
    spec = build_crd()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    return dict(spec["properties"]["routing"]["properties"]["gateway"]["properties"])


@pytest.mark.parametrize("field", ["namespace", "sectionName"])
def test_namespace_and_section_name_are_the_gateway_apis(field: str) -> None:
    theirs, mine = upstream_parent_ref()[field], ours()[field]
    assert {k: mine.get(k) for k in BOUNDS} == {k: theirs.get(k) for k in BOUNDS}


def test_the_name_is_at_least_as_strict_as_the_gateway_apis() -> None:
    """ObjectName has bounds only; a Gateway's name is a DNS subdomain, so ours says so."""
    theirs, mine = upstream_parent_ref()["name"], ours()["name"]
    assert (mine["minLength"], mine["maxLength"]) == (theirs["minLength"], theirs["maxLength"])
    assert mine["pattern"]


def with_gateway(**gateway: Any) -> dict[str, Any]:
    body = next(d for d in yaml.safe_load_all(EXAMPLE.read_text()) if d)
    body["spec"]["routing"]["gateway"] = {"name": "inference-gateway", **gateway}
    return dict(body)


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("namespace", "Bad_NS!"),
        ("namespace", "gateways\n"),
        ("namespace", "a" * 64),
        ("sectionName", "http\nX"),
        ("sectionName", "HTTP"),
        ("sectionName", "-http"),
        ("name", "gw\n"),
    ],
)
def test_a_bad_reference_is_refused_naming_the_field(field: str, value: str) -> None:
    with pytest.raises(ValueError, match=rf"spec\.routing\.gateway\.{field}="):
        parse_llmservice(with_gateway(**{field: value}))


def test_good_references_pass() -> None:
    parsed = parse_llmservice(with_gateway(namespace="gateways", sectionName="https.internal"))
    gateway = parsed.spec.routing.gateway
    assert gateway is not None and gateway.section_name == "https.internal"
