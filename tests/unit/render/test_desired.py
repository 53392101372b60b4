"""render/desired.py: the one desired-state pipeline of the operator and `tokenfleet render`."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from tokenfleet.api import LLMService, parse_llmservice
from tokenfleet.capacity.errors import PlanError
from tokenfleet.capacity.types import Plan
from tokenfleet.commands.render import render_documents
from tokenfleet.engines.images import with_overrides
from tokenfleet.render.desired import Cluster, StepFailed, config_map_ref, desired, model_config

EXAMPLE = Path(__file__).parents[3] / "examples" / "llama-3.1-8b-l4.yaml"


def body(**metadata: Any) -> dict[str, Any]:
    doc: dict[str, Any] = yaml.safe_load(EXAMPLE.read_text())
    doc["metadata"] = {"namespace": "default", **doc["metadata"], **metadata}
    return doc


def kinds(manifests: list[dict[str, Any]]) -> list[str]:
    return [m["kind"] for m in manifests]


def test_the_render_command_prints_what_desired_returns() -> None:
    (rendered,) = render_documents([body()], "in.yaml")
    state = desired(parse_llmservice(body()), None)
    assert rendered.manifests == state.manifests
    assert rendered.plan == state.plan


@pytest.mark.parametrize(
    ("cluster", "present", "absent"),
    [
        (Cluster(), "PodMonitor", None),
        (Cluster(monitoring=False), None, "PodMonitor"),
    ],
)
def test_the_cluster_decides_the_optional_kinds(
    cluster: Cluster, present: str | None, absent: str | None
) -> None:
    found = kinds(desired(parse_llmservice(body()), None, cluster).manifests)
    assert present is None or present in found
    assert absent is None or absent not in found


def test_the_image_table_reaches_the_workload() -> None:
    images = with_overrides(["vllm=mirror.example/vllm:v{version}"])
    state = desired(parse_llmservice(body()), None, Cluster(images=images))
    (deployment,) = [m for m in state.manifests if m["kind"] == "Deployment"]
    image = deployment["spec"]["template"]["spec"]["containers"][0]["image"]
    assert image.startswith("mirror.example/vllm:v")


def test_a_plan_failure_names_the_plan_step() -> None:
    doc = body()
    doc["spec"]["workload"]["maxModelLen"] = 10_000_000  # beyond the model's context
    with pytest.raises(StepFailed) as failed:
        desired(parse_llmservice(doc), None)
    assert failed.value.step == "plan" and failed.value.plan is None
    assert isinstance(failed.value.error, PlanError)


def test_a_render_failure_names_the_render_step_and_keeps_the_plan() -> None:
    service = parse_llmservice(body(name="Not_A_DNS_Label"))
    with pytest.raises(StepFailed) as failed:
        desired(service, None)
    assert failed.value.step == "render" and failed.value.plan is not None
    assert "metadata.name" in str(failed.value)


def test_admit_runs_between_plan_and_render_and_its_refusal_wins() -> None:
    seen: list[Plan] = []

    class Refused(Exception):
        pass

    def admit(service: LLMService, plan: Plan) -> None:
        seen.append(plan)
        raise Refused("not allowed")

    service = parse_llmservice(body(name="Not_A_DNS_Label"))  # render would fail too
    with pytest.raises(Refused):
        desired(service, None, admit=admit)
    assert len(seen) == 1


def test_the_plan_step_is_the_one_given() -> None:
    calls: list[str] = []

    def plan(request: Any) -> Plan:
        calls.append(request.arch.name)
        raise RuntimeError("planner down")

    with pytest.raises(StepFailed) as failed:
        desired(parse_llmservice(body()), None, plan=plan)
    assert calls and failed.value.step == "plan"


@pytest.mark.parametrize(
    ("model", "ref"),
    [
        ({"configMapRef": {"name": "cfg"}}, ("cfg", "config.json")),
        ({"configMapRef": {"name": "cfg", "key": "c.json"}}, ("cfg", "c.json")),
        ({}, None),
    ],
)
def test_config_map_ref(model: dict[str, Any], ref: tuple[str, str] | None) -> None:
    doc = copy.deepcopy(body())
    doc["spec"]["model"].update(model)
    assert config_map_ref(parse_llmservice(doc)) == ref


@pytest.mark.parametrize(
    ("raw", "problem"),
    [("{", "not JSON"), ("[1, 2]", "not a JSON object")],
)
def test_model_config_names_the_problem(raw: str, problem: str) -> None:
    with pytest.raises(ValueError, match=problem):
        model_config(raw)
    assert model_config('{"a": 1}') == {"a": 1}
