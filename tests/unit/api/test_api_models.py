"""The LLMService models: defaults, aliases, catalogs kept in step, one-line parse errors."""

from __future__ import annotations

import copy
import typing
from collections.abc import Iterator, Mapping
from typing import Any

import pytest

from tokenfleet.api import (
    LLMService,
    LLMServiceStatus,
    PlanStatus,
    SpecError,
    default_image,
    parse_llmservice,
)
from tokenfleet.api.gpu import GpuType
from tokenfleet.api.model import Quantization
from tokenfleet.capacity.gpus import GPUS
from tokenfleet.capacity.quantization import QUANTIZATIONS

MINIMAL: dict[str, Any] = {
    "apiVersion": "tokenfleet.dev/v1alpha1",
    "kind": "LLMService",
    "metadata": {"name": "llama", "namespace": "llm", "generation": 3},
    "spec": {"model": {"id": "meta-llama/Llama-3.1-8B"}, "gpu": {"type": "l4"}},
}


def with_spec(**sections: Any) -> dict[str, Any]:
    body = copy.deepcopy(MINIMAL)
    for key, value in sections.items():
        if isinstance(value, dict) and isinstance(body["spec"].get(key), dict):
            body["spec"][key].update(value)
        else:
            body["spec"][key] = value
    return body


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("engine.kind", "vllm"),
        ("engine.image", None),
        ("engine.prefix_caching", True),
        ("engine.kv_cache_dtype", "auto"),
        ("engine.args", []),
        ("model.dtype", "auto"),
        ("model.quantization", None),
        ("model.effective_served_name", "meta-llama/Llama-3.1-8B"),
        ("model.effective_source.hugging_face.repo", "meta-llama/Llama-3.1-8B"),
        ("gpu.count", None),
        ("gpu.resource_name", None),
        ("workload.concurrency", 16),
        ("workload.input_tokens", 2048),
        ("workload.output_tokens", 300),
        ("slo.ttft_ms", 500.0),
        ("slo.tpot_ms", 50.0),
        ("slo.quantile", 0.95),
        ("slo.attainment", 0.99),
        ("replicas", 1),
        ("autoscaling.enabled", False),
        ("autoscaling.min_replicas", 1),
        ("autoscaling.max_replicas", 4),
        ("autoscaling.metric", "ttft"),
        ("autoscaling.scale_down_stabilization_seconds", 180),
        ("autoscaling.prometheus.url", None),
        ("storage", None),
        ("rollout.max_surge", 0),  # no spare GPUs needed for an update
        ("rollout.max_unavailable", 1),
    ],
)
def test_defaults(path: str, expected: Any) -> None:
    value: Any = parse_llmservice(MINIMAL).spec
    for part in path.split("."):
        value = getattr(value, part)
    assert value == expected


def test_object_fields() -> None:
    service = parse_llmservice(MINIMAL)
    assert (service.name, service.namespace, service.generation) == ("llama", "llm", 3)
    assert service.status is None


def test_camel_case_in_yaml_snake_case_in_python() -> None:
    body = with_spec(
        gpu={"tensorParallelSize": 2, "maxPerNode": 4},
        autoscaling={"minReplicas": 2, "maxScaleUpStep": 3},
    )
    spec = parse_llmservice(body).spec
    assert spec.gpu.tensor_parallel_size == 2
    assert spec.gpu.max_per_node == 4
    assert spec.autoscaling.max_scale_up_step == 3
    snake = with_spec(gpu={"tensor_parallel_size": 2})
    assert parse_llmservice(snake).spec.gpu.tensor_parallel_size == 2
    out = parse_llmservice(body).to_dict()
    assert out["spec"]["gpu"]["tensorParallelSize"] == 2
    assert "tensor_parallel_size" not in out["spec"]["gpu"]
    assert "count" not in out["spec"]["gpu"]  # unset fields are left out


def test_round_trip() -> None:
    body = with_spec(
        model={"source": {"huggingFace": {"revision": "main", "tokenSecretRef": {"name": "hf"}}}},
        engine={"env": [{"name": "A", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}}]},
        resources={"requests": {"cpu": 8, "memory": "64Gi"}},
        storage={"size": "50Gi"},
    )
    once = parse_llmservice(body)
    assert parse_llmservice(once.to_dict()) == once
    assert once.spec.model.source.hugging_face.token_secret_ref.key == "HF_TOKEN"
    assert once.to_dict()["spec"]["engine"]["env"][0]["valueFrom"]["secretKeyRef"]["key"] == "k"


def test_free_form_parts_pass_through() -> None:
    affinity = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {}}}
    speculative = {"method": "eagle3", "num_speculative_tokens": 3, "model": "x/y"}
    config = {"model_type": "llama", "rope_scaling": {"factor": 8.0}}
    body = with_spec(
        gpu={"affinity": affinity},
        engine={"speculative": speculative},
        model={"id": "acme/m", "config": config},
    )
    out = parse_llmservice(body).to_dict()["spec"]
    assert out["gpu"]["affinity"] == affinity
    assert out["engine"]["speculative"] == speculative
    assert out["model"]["config"] == config


class KopfLikeBody(Mapping[str, Any]):
    """kopf hands handlers read-only Mapping views, not dicts."""

    def __init__(self, data: dict[str, Any]) -> None:
        self._data = data

    def __getitem__(self, key: str) -> Any:
        value = self._data[key]
        return KopfLikeBody(value) if isinstance(value, dict) else value

    def __iter__(self) -> Iterator[str]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)


def test_accepts_mapping_views() -> None:
    assert parse_llmservice(KopfLikeBody(MINIMAL)).spec.gpu.type == "l4"


def test_gpu_enum_matches_the_capacity_catalog() -> None:
    assert set(typing.get_args(GpuType)) == set(GPUS)


def test_quantization_enum_matches_the_capacity_model() -> None:
    assert set(typing.get_args(Quantization)) == set(QUANTIZATIONS)


@pytest.mark.parametrize(
    ("kind", "version", "image"),
    [
        ("vllm", "0.11.0", "vllm/vllm-openai:v0.11.0"),
        ("vllm", "v0.32.0", "vllm/vllm-openai:v0.32.0"),
        ("sglang", "0.5.23", "lmsysorg/sglang:v0.5.23"),
    ],
)
def test_default_images(kind: str, version: str, image: str) -> None:
    assert default_image(kind, version) == image


def test_image_for_prefers_spec_image_then_spec_version() -> None:
    engine = parse_llmservice(with_spec(engine={"kind": "sglang"})).spec.engine
    assert engine.image_for("0.5.23") == "lmsysorg/sglang:v0.5.23"
    pinned = parse_llmservice(with_spec(engine={"version": "0.10.1"})).spec.engine
    assert pinned.image_for("0.32.0") == "vllm/vllm-openai:v0.10.1"
    custom = parse_llmservice(with_spec(engine={"image": "r.example/vllm:mine"})).spec.engine
    assert custom.image_for("0.32.0") == "r.example/vllm:mine"


@pytest.mark.parametrize(
    ("spec", "needles"),
    [
        ({"gpu": {"type": "h100"}}, ["spec.gpu.type='h100'", "h100-sxm", "use one of"]),
        ({"replicas": -1}, ["spec.replicas=-1", "must be >= 0"]),
        ({"gpu": {"tensorParalelSize": 2}}, ["spec.gpu.tensorParalelSize", "tensorParallelSize?"]),
        ({"bogus": 1}, ["spec.bogus", "unknown field", "known fields: model"]),
        ({"engine": {"kind": "tgi"}}, ["spec.engine.kind='tgi'", "vllm, sglang"]),
        ({"slo": {"ttftMs": 0}}, ["spec.slo.ttftMs=0", "must be > 0"]),
        ({"slo": {"quantile": 1.5}}, ["spec.slo.quantile=1.5", "must be < 1"]),
        ({"engine": {"memoryFraction": 1.2}}, ["spec.engine.memoryFraction=1.2", "<= 0.99"]),
        ({"replicas": "two"}, ["spec.replicas='two'", "integer"]),
        ({"storage": {"size": "lots"}}, ["spec.storage.size='lots'", "does not match"]),
        ({"engine": {"env": [{"value": "1"}]}}, ["spec.engine.env[0].name=<missing>", "set name"]),
        ({"model": {"source": {"uri": "s3://a/b", "pvc": {"claimName": "w"}}}},
         ["spec.model.source:", "exactly one of huggingFace, pvc or uri", "got pvc, uri"]),
        ({"autoscaling": {"minReplicas": 6}},
         ["spec.autoscaling:", "minReplicas=6, maxReplicas=4", "raise maxReplicas"]),
        ({"autoscaling": {"enabled": True, "minReplicas": 0}},
         ["spec.autoscaling.minReplicas: 0 needs spec.routing.enabled: true",
          "routing.enabled=False", "or set spec.autoscaling.minReplicas to 1 or more"]),
        ({"workload": {"prefixCacheHitRate": 1.0}},
         ["spec.workload.prefixCacheHitRate=1.0", "<= 0.95"]),
        ({"routing": {"gateway": {"name": "Bad_Name"}}},
         ["spec.routing.gateway.name='Bad_Name'", "does not match"]),
        ({"gpu": {"count": 8, "tensorParallelSize": 3}},
         ["spec.gpu:", "count must be a multiple of tensorParallelSize"]),
    ],
)  # fmt: skip
def test_parse_errors_are_one_line_and_name_the_field(
    spec: dict[str, Any], needles: list[str]
) -> None:
    with pytest.raises(SpecError) as caught:
        parse_llmservice(with_spec(**spec))
    message = str(caught.value)
    assert "\n" not in message
    for needle in needles:
        assert needle in message
    assert caught.value.field.startswith("spec")


def test_several_errors_are_counted_not_dropped() -> None:
    spec = {f"bad{i}": 1 for i in range(5)}
    with pytest.raises(SpecError) as caught:
        parse_llmservice(with_spec(**spec))
    assert len(caught.value.errors) == 5
    assert str(caught.value).endswith("(and 2 more)")


def test_missing_spec() -> None:
    with pytest.raises(SpecError, match="spec=<missing>: required field is missing"):
        parse_llmservice({"apiVersion": "tokenfleet.dev/v1alpha1", "kind": "LLMService"})


def test_status_parses_what_the_operator_writes_and_ignores_unknown_fields() -> None:
    status = {
        "observedGeneration": 2,
        "phase": "Ready",
        "replicas": 2,
        "readyReplicas": 2,
        "selector": "tokenfleet.dev/llmservice=llama",
        "conditions": [{"type": "Ready", "status": "True", "reason": "ReplicasReady"}],
        "plan": {"tensorParallelSize": 1, "predicted": {"ttftMs": 120.5}, "newField": 1},
        "autoscaling": {"desiredReplicas": 2, "signals": {"ttftSeconds": 0.2, "kvUsage": 0.4}},
        "latestTtftMs": 210.0,
        "fromTheFuture": True,
    }
    service = LLMService.model_validate({**MINIMAL, "status": status})
    assert service.status is not None
    assert service.status.plan is not None and service.status.plan.predicted is not None
    assert service.status.plan.predicted.ttft_ms == 120.5
    assert service.status.autoscaling.signals.kv_usage == 0.4
    out = service.status.to_dict()
    assert out["latestTtftMs"] == 210.0 and "fromTheFuture" not in out


def test_set_condition_moves_transition_time_only_on_status_change() -> None:
    status = LLMServiceStatus()
    assert status.set_condition("Ready", "False", "Pending", "waiting", 1, now="T1")
    assert not status.set_condition("Ready", "False", "Pending", "waiting", 1, now="T2")
    assert status.set_condition("Ready", "False", "Starting", "pulling image", 1, now="T3")
    assert status.condition("Ready").last_transition_time == "T1"
    assert status.set_condition("Ready", "True", "ReplicasReady", "", 1, now="T4")
    assert status.condition("Ready").last_transition_time == "T4"
    status.set_condition("Planned", "True", "Planned", "", 1, now="T5")
    assert [c.type for c in status.conditions] == ["Ready", "Planned"]


def test_plan_status_from_a_real_plan() -> None:
    from tokenfleet.api import to_plan_request
    from tokenfleet.capacity import plan

    result = plan(to_plan_request(parse_llmservice(MINIMAL)))
    summary = PlanStatus.from_plan(result, ["--max-model-len", "8192"]).to_dict()
    assert summary["tensorParallelSize"] == result.tensor_parallel_size
    assert summary["kvCacheTokens"] == result.kv_cache_tokens
    assert summary["engineArgs"] == ["--max-model-len", "8192"]
    assert set(summary["predicted"]) == {"ttftMs", "tpotMs", "goodputRequestsPerSecond"}


def test_scale_to_zero_with_routing_parses_with_its_defaults() -> None:
    spec = parse_llmservice(
        with_spec(
            autoscaling={"enabled": True, "minReplicas": 0},
            routing={"enabled": True, "gateway": {"name": "gw"}},
        )
    ).spec
    assert spec.autoscaling.min_replicas == 0
    assert spec.autoscaling.scale_to_zero_after_seconds == 600
    assert (spec.routing.failure_mode, spec.routing.picker_replicas) == ("FailOpen", 1)
    assert spec.routing.gateway is not None and spec.routing.gateway.namespace is None
    assert spec.workload.prefix_cache_hit_rate == 0.0
    off = parse_llmservice(with_spec()).spec
    assert not off.routing.enabled and off.autoscaling.min_replicas == 1
