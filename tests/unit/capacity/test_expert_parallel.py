"""Expert parallelism (spec.engine.expertParallel, `tokenfleet plan --expert-parallel`).

Whole experts on the TP ranks instead of every expert sliced across them: the same weights
per GPU (up to rounding when the experts do not divide evenly), unsliced fused-MoE
workspaces (vLLM's TritonExperts.workspace_shapes with N = 2 I), and a clear refusal for a
dense model.
"""

from __future__ import annotations

import dataclasses

import pytest

from tests.support.services import llmservice
from tokenfleet.api.planrequest import to_plan_request
from tokenfleet.api.spec import LLMService
from tokenfleet.capacity import PlanRequest, get_gpu, load_model, plan
from tokenfleet.capacity.errors import PlanError
from tokenfleet.capacity.memory import expert_share
from tokenfleet.capacity.validate import check_request

MIXTRAL, QWEN_MOE = "mistralai/Mixtral-8x7B-v0.1", "Qwen/Qwen3-30B-A3B"


def _plan(model: str, tp: int, ep: bool):
    request = PlanRequest(
        arch=load_model(model),
        gpu=get_gpu("h100-sxm"),
        tensor_parallel_size=tp,
        max_model_len=8192,
        expert_parallel=ep,
    )
    return plan(request)


@pytest.mark.parametrize(
    ("model", "tp", "larger"),
    [
        (MIXTRAL, 2, True),  # I = 14,336 > hidden 4,096: unsliced buffers are wider
        (MIXTRAL, 4, True),
        (QWEN_MOE, 2, False),  # I = 768: hidden-wide buffers either way
    ],
)
def test_same_weights_per_gpu_wider_workspaces_for_wide_experts(
    model: str, tp: int, larger: bool
) -> None:
    sliced, whole = _plan(model, tp, False), _plan(model, tp, True)
    assert whole.memory.weights == pytest.approx(sliced.memory.weights)
    assert (whole.memory.activation > sliced.memory.activation) is larger
    assert (whole.kv_cache_tokens < sliced.kv_cache_tokens) is larger
    assert whole.memory.activation >= sliced.memory.activation
    assert whole.expert_parallel and not sliced.expert_parallel


@pytest.mark.parametrize(
    ("experts", "tp", "share"),
    [(8, 2, 1 / 2), (8, 4, 1 / 4), (8, 3, 3 / 8), (128, 8, 1 / 8), (60, 8, 8 / 60)],
)
def test_uneven_experts_load_the_fullest_rank(experts: int, tp: int, share: float) -> None:
    arch = load_model(MIXTRAL)
    assert arch.moe is not None
    arch = dataclasses.replace(arch, moe=dataclasses.replace(arch.moe, experts=experts))
    assert expert_share(arch, tp, expert_parallel=True) == pytest.approx(share)
    assert expert_share(arch, tp, expert_parallel=False) == pytest.approx(1 / tp)


def test_a_dense_model_is_refused_naming_the_flag() -> None:
    request = PlanRequest(
        arch=load_model("meta-llama/Llama-3.1-8B"), gpu=get_gpu("l4"), expert_parallel=True
    )
    with pytest.raises(PlanError) as error:
        check_request(request)
    assert error.value.field == "expert-parallel"
    assert "dense model" in str(error.value) and "remove --expert-parallel" in str(error.value)


def test_a_dense_model_is_refused_naming_the_spec_field() -> None:
    body = llmservice("dense", "team-a", engine={"expertParallel": True})
    service = LLMService.model_validate(body)
    with pytest.raises(PlanError) as error:
        to_plan_request(service)
    assert error.value.field == "spec.engine.expertParallel"
    assert "remove spec.engine.expertParallel" in str(error.value)
