"""to_plan_request: spec fields to planner inputs, and errors that name the spec field."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from tokenfleet.api import parse_llmservice, to_plan_request
from tokenfleet.capacity.errors import PlanError
from tokenfleet.errors import UserError

BASE: dict[str, Any] = {
    "metadata": {"name": "m"},
    "spec": {"model": {"id": "meta-llama/Llama-3.1-70B"}, "gpu": {"type": "h100-sxm"}},
}
LLAMA_CONFIG = {
    "model_type": "llama",
    "hidden_size": 4096,
    "intermediate_size": 14336,
    "num_hidden_layers": 32,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "vocab_size": 128256,
    "max_position_embeddings": 131072,
    "torch_dtype": "bfloat16",
}


def service(**spec: Any) -> Any:
    body = copy.deepcopy(BASE)
    for key, value in spec.items():
        body["spec"].setdefault(key, {}).update(value)
    return parse_llmservice(body)


def test_fields_are_carried_over() -> None:
    req = to_plan_request(
        service(
            engine={"kind": "sglang", "version": "0.5.4", "kvCacheDtype": "fp8",
                    "memoryFraction": 0.85, "maxNumSeqs": 64, "maxNumBatchedTokens": 4096},
            model={"dtype": "bfloat16", "quantization": "fp8"},
            workload={"maxModelLen": 8192, "concurrency": 4, "inputTokens": 100,
                      "outputTokens": 10},
            slo={"ttftMs": 250, "tpotMs": 20},
            gpu={"pricePerHour": 2.0, "maxPerNode": 4},
        )
    )  # fmt: skip
    assert req.engine == "sglang" and req.engine_version == "0.5.4"
    assert (req.kv_cache_dtype, req.memory_fraction) == ("fp8", 0.85)
    assert (req.max_num_seqs, req.max_num_batched_tokens) == (64, 4096)
    assert (req.dtype, req.quantization) == ("bfloat16", "fp8")
    assert (req.max_model_len, req.concurrency, req.input_tokens, req.output_tokens) == (
        8192, 4, 100, 10,
    )  # fmt: skip
    assert (req.ttft_slo_ms, req.tpot_slo_ms) == (250, 20)
    assert req.gpu.id == "h100-sxm" and req.gpu.price_per_hour == 2.0
    assert req.max_gpus_per_node == 4
    assert req.arch.layers == 80  # catalog entry of Llama-3.1-70B


@pytest.mark.parametrize(
    ("gpu", "tp", "pp"),
    [
        ({}, None, None),
        ({"tensorParallelSize": 4}, 4, None),
        ({"count": 4}, 4, 1),
        ({"count": 16}, 8, 2),  # across nodes: TP inside a node, PP across
        ({"count": 8, "maxPerNode": 4}, 4, 2),
        ({"count": 8, "tensorParallelSize": 2}, 2, 4),
        ({"count": 8, "pipelineParallelSize": 2}, 4, 2),
        ({"count": 8, "tensorParallelSize": 4, "pipelineParallelSize": 2}, 4, 2),
    ],
)
def test_gpu_count_becomes_tp_and_pp(gpu: dict[str, Any], tp: int | None, pp: int | None) -> None:
    req = to_plan_request(service(gpu=gpu))
    assert (req.tensor_parallel_size, req.pipeline_parallel_size) == (tp, pp)


def test_inline_config_wins_over_catalog_and_caller_config() -> None:
    inline = {**LLAMA_CONFIG, "num_hidden_layers": 40}
    svc = service(model={"id": "acme/custom", "config": inline})
    assert to_plan_request(svc, LLAMA_CONFIG).arch.layers == 40


def test_config_map_content_from_the_caller() -> None:
    svc = service(model={"id": "acme/custom", "configMapRef": {"name": "cfg"}})
    assert to_plan_request(svc, LLAMA_CONFIG).arch.layers == 32


@pytest.mark.parametrize(
    ("spec", "config", "field", "needle"),
    [
        ({"model": {"id": "acme/custom", "configMapRef": {"name": "cfg"}}}, None,
         "spec.model.configMapRef", "cfg/config.json"),
        ({"model": {"id": "acme/unknown-model"}}, None, "spec.model.id", "spec.model.config"),
        ({"model": {"id": "/etc/passwd.json"}}, None, "spec.model.id", "file path"),
        ({"gpu": {"count": 12}}, None, "spec.gpu.count", "multiple of 8"),
        ({"model": {"id": "acme/custom", "config": {"model_type": "llama"}}}, None,
         "spec.model.config", "config key"),
    ],
)  # fmt: skip
def test_errors_name_the_spec_field(
    spec: dict[str, Any], config: Any, field: str, needle: str
) -> None:
    with pytest.raises(UserError) as caught:
        to_plan_request(service(**spec), config)
    assert str(caught.value).startswith(field), str(caught.value)
    assert needle in str(caught.value)
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize(
    ("spec", "field", "fragment"),
    [
        ({"engine": {"version": "99.0"}}, "spec.engine.version", "use spec.engine.version 0.32"),
        ({"model": {"quantization": "awq"}}, "spec.model.quantization", "unquantized"),
        ({"workload": {"inputTokens": 10_000_000}}, "spec.workload.inputTokens", "context"),
    ],
)
def test_the_operator_refuses_what_the_cli_refuses(
    spec: dict[str, Any], field: str, fragment: str
) -> None:
    with pytest.raises(PlanError) as error:
        to_plan_request(service(**spec))
    assert error.value.field == field
    assert fragment in str(error.value)
    assert "--" not in str(error.value)


def test_plan_service_words_errors_and_warnings_for_the_yaml() -> None:
    from tokenfleet.api import plan_service

    # No maxModelLen: the planner lowers the context and says how to choose it.
    planned = plan_service(
        to_plan_request(
            service(model={"id": "meta-llama/Llama-3.1-8B"}, gpu={"type": "l4", "count": 1})
        )
    )
    lowered = [w for w in planned.warnings if "max-model-len lowered" in w]
    assert lowered and "set spec.workload.maxModelLen to choose" in lowered[0]
    assert not any("--max-model-len" in w for w in planned.warnings)
    with pytest.raises(PlanError) as error:
        plan_service(to_plan_request(service(gpu={"type": "h100-sxm", "tensorParallelSize": 3})))
    assert error.value.field == "spec.gpu.tensorParallelSize"


# --- spec.gpu.type auto -------------------------------------------------------------------


def test_auto_carries_the_candidates_with_their_prices_and_counts() -> None:
    from tokenfleet.capacity.gpus import get_gpu

    req = to_plan_request(service(gpu={"type": "auto", "candidates": [
        {"type": "h100-sxm", "pricePerHour": 2.49, "maxCount": 8}, {"type": "l40s"}]}))  # fmt: skip
    assert [(c.gpu.id, c.gpu.price_per_hour, c.max_count) for c in req.gpu_candidates] == [
        ("h100-sxm", 2.49, 8),
        ("l40s", get_gpu("l40s").price_per_hour, None),
    ]
    assert req.gpu.id == "h100-sxm"


def test_auto_without_candidates_takes_the_operators_offers(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from tokenfleet.capacity import gpu_choice
    from tokenfleet.capacity.gpus import get_gpu

    offers = [gpu_choice.GpuCandidate(get_gpu("a100-80gb").with_price(1.5), 16)]
    monkeypatch.setattr(gpu_choice, "OFFERS", offers)
    monkeypatch.setattr("tokenfleet.api.planrequest.OFFERS", offers)
    req = to_plan_request(service(gpu={"type": "auto"}))
    assert req.gpu_candidates == tuple(offers)
    # A listed candidate the operator offers takes the offer's price and count.
    listed = to_plan_request(service(gpu={"type": "auto", "candidates": [{"type": "a100-80gb"}]}))
    assert (listed.gpu_candidates[0].gpu.price_per_hour, listed.gpu_candidates[0].max_count) == (
        1.5,
        16,
    )


def test_auto_with_nothing_to_choose_from_says_where_to_list_types() -> None:
    with pytest.raises(UserError) as caught:
        to_plan_request(service(gpu={"type": "auto"}))
    assert str(caught.value).startswith(
        "spec.gpu.candidates=[]: type auto chooses among candidates, and neither the spec nor "
        "the operator (its GPU offers) lists any; list them"
    )


def test_no_candidate_that_serves_is_named_on_the_candidates_field() -> None:
    from tokenfleet.api import plan_service

    req = to_plan_request(service(gpu={"type": "auto", "candidates": [{"type": "l4"}]}))
    with pytest.raises(PlanError) as caught:
        plan_service(req)
    assert str(caught.value).startswith("spec.gpu.candidates=l4: no candidate GPU type can serve")


@pytest.mark.parametrize(
    ("gpu", "message"),
    [
        ({"type": "l4", "candidates": [{"type": "l40s"}]},
         "candidates are the types type auto chooses from"),
        ({"type": "auto", "pricePerHour": 2.0, "candidates": [{"type": "l40s"}]},
         "pricePerHour is the price of one type"),
        ({"type": "auto", "candidates": [{"type": "l40s"}, {"type": "l40s"}]},
         "candidates name a type twice (l40s)"),
        ({"type": "auto", "candidates": [{"type": "h100-sxm-mig-9g"}]},
         "spec.gpu.candidates[0].type='h100-sxm-mig-9g': not an allowed value"),
    ],
)  # fmt: skip
def test_bad_candidates_are_refused_naming_the_rule(gpu: dict[str, Any], message: str) -> None:
    with pytest.raises(Exception) as caught:
        service(gpu=gpu)
    assert message in str(caught.value)
