"""SGLang's GPU-dependent defaults, table by table, as its source sets them.

sglang@0.5.9:python/sglang/srt/server_args.py (`_handle_gpu_memory_settings`,
`_handle_attention_backend_compatibility`, `_handle_model_specific_adjustments`) and
sglang@0.5.23:python/sglang/srt/arg_groups/memory_hook.py.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from tokenfleet.capacity import get_gpu, load_model
from tokenfleet.capacity.architecture import Attention
from tokenfleet.capacity.engine_profiles import default_batch_limits, sglang_default_mem_fraction
from tokenfleet.capacity.sglang_defaults import (
    COMPUTE_CAPABILITY,
    MemoryTier,
    attention_backend,
    launch_page_size,
    memory_tier,
    page_size,
)


@pytest.mark.parametrize(
    ("memory_gib", "tp", "version", "chunk", "graphs"),
    [
        (16.0, 1, "0.5.9", 2048, 8),  # T4
        (22.05, 1, "0.5.9", 2048, 24),  # A10G, L4: 0.5.9
        (22.05, 4, "0.5.9", 2048, 80),
        (22.05, 1, "0.5.23", 4096, 48),  # 0.5.23 widened the sub-35 GiB tier
        (22.05, 4, "0.5.23", 4096, 160),
        (39.4, 1, "0.5.9", 4096, 32),  # A100-40GB
        (44.42, 4, "0.5.9", 4096, 160),  # L40S
        (79.19, 2, "0.5.9", 8192, 256),  # H100
        (79.19, 8, "0.5.9", 8192, 512),
        (139.8, 2, "0.5.9", 8192, 256),  # H200
        (139.8, 8, "0.5.9", 8192, 512),
        (159.99, 8, "0.5.9", 8192, 512),  # the tier ends at 160 GiB, not 160 GB
        (160.0, 1, "0.5.9", 16384, 512),
        (178.4, 1, "0.5.9", 16384, 512),  # B200: 512 graphs at every TP
        (178.4, 8, "0.5.23", 16384, 512),
        (191.98, 2, None, 16384, 512),  # MI300X, the newest release
    ],
)
def test_memory_tier_by_gpu_memory(
    memory_gib: float, tp: int, version: str | None, chunk: int, graphs: int
) -> None:
    assert memory_tier(memory_gib, tp, version) == MemoryTier(chunk, graphs)


@pytest.mark.parametrize(
    ("gpu", "model", "backend"),
    [
        ("h100-sxm", "Qwen/Qwen3-32B", "fa3"),
        ("h200", "meta-llama/Llama-3.1-8B", "fa3"),
        ("b200", "meta-llama/Llama-3.1-70B", "trtllm_mha"),
        ("a100-80gb", "Qwen/Qwen3-32B", "flashinfer"),
        ("l40s", "Qwen/Qwen3-8B", "flashinfer"),
        ("mi300x", "Qwen/Qwen3-32B", "aiter"),
        ("h200", "deepseek-ai/DeepSeek-V3", "fa3"),
        ("b200", "deepseek-ai/DeepSeek-V3", "trtllm_mla"),
        ("a100-80gb", "deepseek-ai/DeepSeek-V3", "triton"),
        ("mi300x", "deepseek-ai/DeepSeek-V3", "aiter"),  # 128 KV heads at TP 1
        ("b200", "openai/gpt-oss-120b", "trtllm_mha"),
        ("h100-sxm", "openai/gpt-oss-120b", "fa3"),
        ("a100-80gb", "openai/gpt-oss-120b", "triton"),
    ],
)
def test_attention_backend_by_compute_capability(gpu: str, model: str, backend: str) -> None:
    assert attention_backend(gpu, load_model(model)) == backend


def test_other_mla_models_take_flashinfer_on_blackwell() -> None:
    """Only DeepseekV3ForCausalLM is moved to trtllm_mla; another MLA model keeps the
    generic choice (flashinfer on sm100)."""
    v3 = load_model("deepseek-ai/DeepSeek-V3")
    v2 = replace(v3, model_type="deepseek_v2")
    assert attention_backend("b200", v2) == "flashinfer"
    assert attention_backend("h200", v2) == "fa3"


def test_rocm_mla_takes_aiter_only_at_16_or_128_kv_heads_per_rank() -> None:
    v3 = load_model("deepseek-ai/DeepSeek-V3")
    assert attention_backend("mi300x", v3, tp=8) == "aiter"  # 128 // 8 = 16
    assert attention_backend("mi300x", v3, tp=4) == "triton"  # 32
    odd = replace(v3, attention=Attention(64, 64, 128, kv_lora_rank=512, qk_rope_head_dim=64))
    assert attention_backend("mi300x", odd) == "triton"


@pytest.mark.parametrize(
    ("backend", "page"),
    [
        ("trtllm_mha", 64),
        ("trtllm_mla", 64),
        ("flashmla", 64),
        ("cutlass_mla", 128),
        ("fa3", 1),
        ("flashinfer", 1),
        ("triton", 1),
        ("aiter", 1),
    ],
)
def test_page_size_forced_by_the_backend(backend: str, page: int) -> None:
    assert page_size(backend) == page


def test_blackwell_launches_page_by_64_and_hopper_by_1() -> None:
    for model in ("deepseek-ai/DeepSeek-V3", "meta-llama/Llama-3.1-70B", "openai/gpt-oss-120b"):
        arch = load_model(model)
        assert launch_page_size("b200", arch) == 64
        assert launch_page_size("h200", arch) == 1
        assert launch_page_size("h100-sxm", arch) == 1


def test_every_catalog_gpu_has_a_compute_capability() -> None:
    from tokenfleet.capacity.gpus import GPUS

    # A MIG slice has its GPU's compute capability (capacity/mig.py).
    assert {g.base_id for g in GPUS.values()} == set(COMPUTE_CAPABILITY)


@pytest.mark.parametrize(
    ("gpu", "chunk"),
    [("l4", 4096), ("a100-40gb", 4096), ("l40s", 4096), ("h100-sxm", 8192), ("h200", 8192),
     ("b200", 16384), ("mi300x", 16384)],
)  # fmt: skip
def test_the_planner_takes_sglangs_chunk_from_the_memory_tier(gpu: str, chunk: int) -> None:
    assert default_batch_limits("sglang", get_gpu(gpu))[0] == chunk
    assert default_batch_limits("sglang", get_gpu("l4"), "0.5.9")[0] == 2048


@pytest.mark.parametrize(("tp", "graphs"), [(1, 512), (2, 512), (8, 512)])
def test_the_default_fraction_reserves_the_tiers_cuda_graphs_on_b200(tp: int, graphs: int) -> None:
    """B200: 512 MB + 1.5 MB x 16384 + 2 MB x 512 graphs + tp / 8 GB, at every TP."""
    g = get_gpu("b200")
    total_mb = g.memory_gib * 1024
    reserved = 512 + 16384 * 1.5 + graphs * 2 + tp / 8 * 1024
    want = round((total_mb - reserved) / total_mb, 3)
    assert sglang_default_mem_fraction(g, 16384, tp, 1, "0.5.9") == want
