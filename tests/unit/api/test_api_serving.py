"""spec.serving: its refusals, the same sentence from the CRD's CEL rules (evaluated by
cel-python, tests/support/crd_checker.py) and from the operator's Python validators, and the
connector rules the operator applies where the spec fixes a pair of role TP sizes."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support.crd_checker import CrdValidator
from tokenfleet.api import parse_llmservice, to_plan_request
from tokenfleet.api.parse import SpecError
from tokenfleet.capacity import PlanError

CRD = Path(__file__).resolve().parents[3] / "crds" / "tokenfleet.dev_llmservices.yaml"
BASE: dict[str, Any] = {
    "apiVersion": "tokenfleet.dev/v1alpha1",
    "kind": "LLMService",
    "metadata": {"name": "t", "namespace": "ns"},
    "spec": {"model": {"id": "meta-llama/Llama-3.1-8B"}, "gpu": {"type": "h100-sxm"}},
}


@pytest.fixture(scope="module")
def validator() -> CrdValidator:
    return CrdValidator(yaml.safe_load(CRD.read_text()))


def body(**spec: Any) -> dict[str, Any]:
    out = copy.deepcopy(BASE)
    out["spec"].update(spec)
    return out


def refusals(validator: CrdValidator, obj: dict[str, Any]) -> tuple[list[str], list[str]]:
    cel = [e for e in validator.errors(obj) if "Invalid value:" in e]
    assert [e for e in validator.errors(obj) if "Invalid value:" not in e] == []  # schema ok
    try:
        parse_llmservice(obj)
        python: list[str] = []
    except SpecError as e:
        python = e.errors
    return cel, python


@pytest.mark.parametrize(
    ("spec", "needle"),
    [
        ({"serving": {"mode": "disaggregated"}}, "needs spec.routing.enabled: true"),
        ({"serving": {"mode": "auto"}}, "needs spec.routing.enabled: true"),
        ({"routing": {"enabled": True}, "serving": {"mode": "disaggregated",
          "transferBackend": "mooncake"}}, "mooncake is an SGLang backend"),
        ({"serving": {"prefill": {"tensorParallelSize": 2}}}, "apply to disaggregated serving"),
        ({"serving": {"prefillReplicas": 3}}, "apply to disaggregated serving"),
        ({"routing": {"enabled": True}, "serving": {"mode": "disaggregated"}}, None),
        ({"routing": {"enabled": True}, "engine": {"kind": "sglang"},
          "serving": {"mode": "disaggregated", "transferBackend": "mooncake"}}, None),
        ({}, None),
    ],
)  # fmt: skip
def test_cel_and_python_agree(
    spec: dict[str, Any], needle: str | None, validator: CrdValidator
) -> None:
    cel, python = refusals(validator, body(**spec))
    assert bool(cel) == bool(python) == (needle is not None), (cel, python)
    if needle is not None:
        assert any(needle in line for line in python) and any(needle in c for c in cel)
        assert all("spec.serving" in line or "spec.routing" in line for line in python)


def pd(**serving: Any) -> dict[str, Any]:
    return body(routing={"enabled": True}, serving={"mode": "disaggregated", **serving})


@pytest.mark.parametrize(
    ("obj", "field", "fix"),
    [
        # vLLM before 0.32 asserts "Decode TP cannot be smaller than prefill TP".
        ({**pd(prefill={"tensorParallelSize": 4}, decode={"tensorParallelSize": 2}),
          "spec": {**pd()["spec"], "engine": {"version": "0.20.0"},
                   "serving": {"mode": "disaggregated", "prefill": {"tensorParallelSize": 4},
                               "decode": {"tensorParallelSize": 2}}}},
         "spec.serving.decode.tensorParallelSize", "use decode TP 4"),
        # SGLang's transfer between unequal TP without MLA.
        ({**pd(), "spec": {**pd()["spec"], "engine": {"kind": "sglang"},
                           "serving": {"mode": "disaggregated", "transferBackend": "mooncake",
                                       "prefill": {"tensorParallelSize": 2},
                                       "decode": {"tensorParallelSize": 4}}}},
         "spec.serving.decode.tensorParallelSize", "use decode TP 2"),
        # A vLLM without kv_load_failure_policy.
        ({**pd(), "spec": {**pd()["spec"], "engine": {"version": "0.11.0"}}},
         "spec.engine.version", "or newer"),
    ],
)  # fmt: skip
def test_connector_rules_name_the_spec_field(obj: dict[str, Any], field: str, fix: str) -> None:
    with pytest.raises(PlanError) as e:
        to_plan_request(parse_llmservice(obj))
    assert e.value.field == field and fix in e.value.fix
    assert "\n" not in str(e.value)


def test_a_pair_the_connector_accepts_plans() -> None:
    obj = pd(prefill={"tensorParallelSize": 2}, decode={"tensorParallelSize": 4})
    request = to_plan_request(parse_llmservice(obj))
    assert (request.serving.prefill_tp, request.serving.decode_tp) == (2, 4)
    assert request.serving.mode == "disaggregated"
