"""LoRA slots: the bytes each engine preallocates, the settings resolved, and the plan.

The byte counts are worked out by hand from the buffer shapes of vllm/lora/layers/*.py and
sglang/srt/lora/mem_pool.py (see capacity/lora.py); the real vLLM CPU engine checks the
same arithmetic end to end in tests/system/test_lora_memory_real_vllm.py.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from tokenfleet.capacity import PlanError, PlanRequest, get_gpu, load_model, plan
from tokenfleet.capacity.lora import (
    LoraRequest,
    LoraSlots,
    buffer_bytes,
    default_slots,
    resolve,
    stage_bytes,
    vllm_rank,
)
from tokenfleet.capacity.types import GIB

LLAMA_8B = load_model("meta-llama/Llama-3.1-8B")

# Llama-3.1-8B: hidden 4096, 32 heads / 8 KV heads of 128, intermediate 14336, vocab 128256,
# 32 layers. Elements per slot per unit of rank, TP 1:
QKV = 3 * 4096 + (4096 + 2 * 1024)  # three A slices over hidden; B = q + k + v
O_PROJ = 4096 + 4096
GATE_UP = 2 * 4096 + 2 * 14336
DOWN = 14336 + 4096
EMBED = 128256 + 4096  # A = vocab x R, B = hidden x R
LM_HEAD = 4096 + 128256


@pytest.mark.parametrize(
    ("engine", "slots", "rank", "tp", "expected_per_rank"),
    [
        # vLLM TP 1: every layer's four wrapped modules, embedding and LM head, 8 slots.
        ("vllm", 8, 64, 1, 8 * 64 * (32 * (QKV + O_PROJ + GATE_UP + DOWN) + EMBED + LM_HEAD)),
        (
            # TP 2: column outputs and row inputs halve; A of qkv / gate_up, B of o / down,
            # the embedding and vLLM's LM head (whole vocabulary) do not.
            "vllm",
            4,
            16,
            2,
            4
            * 16
            * (
                32 * (3 * 4096 + (2048 + 2 * 512) + 2048 + 4096 + 2 * 4096 + 2 * 7168 + 7168 + 4096)
                + EMBED
                + LM_HEAD
            ),
        ),
        # SGLang: one more slot (the base model's requests) and the LM head's B split by TP.
        ("sglang", 3, 32, 1, 4 * 32 * (32 * (QKV + O_PROJ + GATE_UP + DOWN) + EMBED + LM_HEAD)),
        (
            "sglang",
            3,
            32,
            2,
            4
            * 32
            * (
                32 * (3 * 4096 + (2048 + 2 * 512) + 2048 + 4096 + 2 * 4096 + 2 * 7168 + 7168 + 4096)
                + EMBED
                + 4096
                + 128256 // 2
            ),
        ),
    ],
)
def test_buffer_bytes_match_the_engines_shapes(
    engine: str, slots: int, rank: int, tp: int, expected_per_rank: int
) -> None:
    got = buffer_bytes(LLAMA_8B, LoraSlots(slots, rank), engine, tp=tp, dtype_bytes=2.0)
    assert got == pytest.approx(expected_per_rank * 2.0)


def test_eight_slots_at_rank_64_on_an_8b_model_take_about_two_and_a_half_gib() -> None:
    """The issue's figure: 8 slots x rank 64 on Llama-3.1-8B, bf16, one GPU."""
    got = buffer_bytes(LLAMA_8B, LoraSlots(8, 64), "vllm") / GIB
    linear_only = buffer_bytes(
        LLAMA_8B, LoraSlots(8, 64, target_modules=("q_proj", "k_proj", "v_proj", "o_proj",
                                                   "gate_proj", "up_proj", "down_proj")), "vllm"
    ) / GIB  # fmt: skip
    assert linear_only == pytest.approx(2.5, abs=0.01)
    assert got == pytest.approx(2.75, abs=0.01)  # + embedding and LM head


def test_target_modules_restrict_the_buffers_to_their_packed_modules() -> None:
    # q_proj alone still gets the whole packed qkv buffer (vLLM: the packed parent matches
    # when any child is targeted; SGLang normalises q/k/v to qkv_proj).
    q_only = LoraSlots(1, 8, target_modules=("q_proj",))
    assert buffer_bytes(LLAMA_8B, q_only, "vllm") == pytest.approx(32 * 8 * QKV * 2.0)
    mlp = LoraSlots(1, 8, target_modules=("down_proj",))
    assert buffer_bytes(LLAMA_8B, mlp, "vllm") == pytest.approx(32 * 8 * DOWN * 2.0)


def test_pipeline_stages_hold_their_own_layers_in_vllm_and_every_layer_in_sglang() -> None:
    lora = LoraSlots(2, 16)
    first, last = stage_bytes(LLAMA_8B, lora, "vllm", 1, 2, 2.0)
    layer = 2 * 16 * (QKV + O_PROJ + GATE_UP + DOWN) * 2.0
    assert first == pytest.approx(16 * layer + 2 * 16 * EMBED * 2.0)
    assert last == pytest.approx(16 * layer + 2 * 16 * LM_HEAD * 2.0)
    sglang = stage_bytes(LLAMA_8B, lora, "sglang", 1, 2, 2.0)
    assert sglang[0] == sglang[1] == pytest.approx(buffer_bytes(LLAMA_8B, lora, "sglang"))


def test_fully_sharded_loras_split_the_rank_of_a_and_the_output_of_row_b() -> None:
    lora = LoraSlots(1, 16)
    plain = stage_bytes(LLAMA_8B, lora, "vllm", 2, 1, 2.0)[0]
    sharded = stage_bytes(LLAMA_8B, lora, "vllm", 2, 1, 2.0, fully_sharded=True)[0]
    # per layer: qkv A 3 x 16 x 4096 and gate_up A 2 x 16 x 4096 halve, o / down B too
    saved = 32 * 16 * (3 * 4096 + 2 * 4096 + 4096 + 4096) / 2 * 2.0
    assert plain - sharded == pytest.approx(saved)


def test_moe_experts_get_slots_per_local_expert() -> None:
    """Per local expert: w1 and w3 A over the hidden size (not split by TP), B over the
    intermediate shard; w2 A over the shard, B over the hidden size."""
    mixtral = load_model("mistralai/Mixtral-8x7B-Instruct-v0.1")
    m = mixtral.moe
    assert m is not None
    h, inter, layers, r = mixtral.hidden, m.expert_intermediate, mixtral.layers, 8
    lora = LoraSlots(1, r)
    tp2 = stage_bytes(mixtral, lora, "vllm", 2, 1, 2.0)[0]
    ep2 = stage_bytes(mixtral, lora, "vllm", 2, 1, 2.0, expert_parallel=True)[0]
    per_expert_tp2 = 2 * (r * h + inter / 2 * r) + r * inter / 2 + h * r
    per_expert_ep2 = 2 * (r * h + inter * r) + r * inter + h * r
    experts_tp2 = 8 * per_expert_tp2 * layers * 2.0  # 8 experts, each split in two
    experts_ep2 = 4 * per_expert_ep2 * layers * 2.0  # 4 whole experts per rank
    assert tp2 - ep2 == pytest.approx(experts_tp2 - experts_ep2)
    assert experts_tp2 - experts_ep2 == pytest.approx(12 * h * r * layers * 2.0)


@pytest.mark.parametrize(
    ("rank", "expected"), [(1, 1), (8, 8), (9, 16), (48, 64), (300, 320), (512, 512)]
)
def test_vllm_pads_a_rank_to_the_next_one_it_preallocates(rank: int, expected: int) -> None:
    assert vllm_rank(rank) == expected


@pytest.mark.parametrize(
    ("adapters", "pinned", "expected"), [(0, 0, 1), (1, 0, 1), (3, 0, 4), (5, 0, 8), (2, 6, 8)]
)
def test_default_slots_round_up_to_a_power_of_two(
    adapters: int, pinned: int, expected: int
) -> None:
    assert default_slots(adapters, pinned) == expected


def test_resolve_takes_the_largest_rank_listed_padded_for_vllm() -> None:
    got = resolve(LoraRequest(adapters=3, ranks=(8, 48)), "vllm")
    assert (got.slots, got.max_rank, got.chosen) == (4, 64, True)
    assert resolve(LoraRequest(adapters=3, ranks=(8, 48)), "sglang").max_rank == 48
    assert resolve(LoraRequest(), "vllm").max_rank == 16


@pytest.mark.parametrize(
    ("request_", "engine", "field", "words"),
    [
        (LoraRequest(max_rank=48), "vllm", "lora-rank", "use 64"),
        (LoraRequest(ranks=(64,), max_rank=32), "sglang", "lora-rank", "raise it to 64"),
        (LoraRequest(pinned=3, slots=2), "sglang", "lora-slots", "raise it to 3"),
        (LoraRequest(slots=4, max_cpu_loras=2), "vllm", "lora max-cpu-loras", "raise it to 4"),
        (LoraRequest(max_rank=1024), "sglang", "lora-rank", "between 1 and 512"),
    ],
)
def test_resolve_refuses_with_the_field_and_the_fix(
    request_: LoraRequest, engine: str, field: str, words: str
) -> None:
    with pytest.raises(PlanError) as caught:
        resolve(request_, engine)
    assert caught.value.field == field
    assert words in str(caught.value)


def _request(**kwargs: object) -> PlanRequest:
    base = PlanRequest(arch=LLAMA_8B, gpu=get_gpu("h100-sxm"), tensor_parallel_size=1)
    return replace(base, **kwargs)  # type: ignore[arg-type]


def test_the_plan_shows_the_slots_and_holds_that_much_less_kv_cache() -> None:
    bare = plan(_request())
    lora = LoraRequest(adapters=8, slots=8, max_rank=64)
    with_slots = plan(_request(lora=lora))
    assert with_slots.lora == LoraSlots(8, 64, adapters=8)
    assert with_slots.memory.lora == pytest.approx(buffer_bytes(LLAMA_8B, LoraSlots(8, 64), "vllm"))
    lost = (bare.kv_cache_tokens - with_slots.kv_cache_tokens) * bare.kv_bytes_per_token
    # Whole 16-token blocks: within one block of the slots' bytes.
    assert abs(lost - with_slots.memory.lora) <= 16 * bare.kv_bytes_per_token
    assert with_slots.as_dict()["memory"]["lora"] == pytest.approx(2.75, abs=0.01)
    assert with_slots.as_dict()["lora"] == {"maxLoras": 8, "maxRank": 64}
    # The LoRA kernels cost every step something (a prior: capacity/lora.py).
    assert with_slots.predicted.tpot_ms > bare.predicted.tpot_ms


def test_slots_that_leave_no_kv_for_one_request_are_refused_on_their_field() -> None:
    lora = LoraRequest(adapters=2, slots=16, max_rank=512)
    with pytest.raises(PlanError) as caught:
        plan(_request(gpu=get_gpu("l4"), max_model_len=32768, lora=lora))
    error = caught.value
    assert error.field == "lora-slots"
    assert "leaves no KV cache for one request of max-model-len 32,768" in str(error)
    assert "lower it or lora-rank" in error.fix


def test_default_slots_shrink_to_leave_the_workload_its_kv_cache() -> None:
    """40 adapters of rank 256 on two L4s: 64 slots would eat the KV cache; the planner
    keeps halving until the workload's 16 requests fit again and says so."""
    lora = LoraRequest(adapters=40, ranks=(256,))
    on_l4 = {"gpu": get_gpu("l4"), "tensor_parallel_size": 2, "max_model_len": 8192}
    p = plan(_request(lora=lora, **on_l4))
    assert p.lora is not None and p.lora.chosen
    assert p.lora.slots < 64
    assert p.kv_cache_tokens >= 16 * (2048 + 300)
    assert any("GPU slot(s) for 40 adapters" in w for w in p.warnings)
    doubled = plan(_request(lora=replace(lora, slots=p.lora.slots * 2), **on_l4))
    assert doubled.kv_cache_tokens < 16 * (2048 + 300)


def test_given_slots_are_kept_even_when_the_workload_would_want_fewer() -> None:
    lora = LoraRequest(adapters=40, ranks=(256,), slots=8)
    p = plan(_request(gpu=get_gpu("l4"), tensor_parallel_size=2, max_model_len=8192, lora=lora))
    assert p.lora is not None and p.lora.slots == 8 and not p.lora.chosen
    assert p.kv_cache_tokens < 16 * (2048 + 300)


def test_sglang_plans_count_the_base_models_slot() -> None:
    req = _request(engine="sglang", lora=LoraRequest(adapters=2, slots=2, max_rank=16))
    p = plan(req)
    # At TP 1 SGLang's shapes are vLLM's; its 2 adapter slots are 3 buffers.
    assert p.memory.lora == pytest.approx(buffer_bytes(LLAMA_8B, LoraSlots(3, 16), "vllm"))
