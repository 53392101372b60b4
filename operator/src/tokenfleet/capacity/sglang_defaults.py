"""SGLang's defaults that depend on the GPU, as the engine's own source decides them. Pure.

Read at sglang 0.5.9 (the release the H200 and B200 silicon rows ran) and 0.5.23 (the
planner's default release):

- Memory tier. `chunked_prefill_size` and the decode CUDA-graph batch cap follow the GPU's
  memory in MiB as torch reports it (sglang@0.5.9:python/sglang/srt/server_args.py
  `ServerArgs._handle_gpu_memory_settings`; sglang@0.5.23:python/sglang/srt/arg_groups/
  memory_hook.py `handle_gpu_memory_settings`). The two releases differ below 35 GiB only
  (0.5.9: 2048 tokens, 24 or 80 graphs; 0.5.23: 4096, 48 or 160); releases between them are
  given 0.5.9's table.
- Attention backend when none is given (0.5.9 server_args.py
  `_handle_attention_backend_compatibility` and `_handle_model_specific_adjustments`): MHA
  models take fa3 on Hopper (sm90), trtllm_mha on Blackwell (sm100), aiter on ROCm, else
  flashinfer; DeepSeek V3 / R1 (DeepseekV3ForCausalLM) take trtllm_mla on sm100; other MLA
  models fa3 on sm90, flashinfer on sm100, triton elsewhere; gpt-oss trtllm_mha on sm100, fa3
  on sm90, else triton.
- Page size. SGLang pages its KV pool by 1 token unless the backend forces more: trtllm_mha
  and trtllm_mla raise it to 64, flashmla to 64, cutlass_mla to 128 (same function of
  0.5.9). A request then holds its tokens rounded up to whole pages.
"""

from __future__ import annotations

from dataclasses import dataclass

from tokenfleet.capacity.architecture import ModelArch
from tokenfleet.capacity.engine_profiles import parse_version

# Compute capability (major, minor) of the catalog's GPUs; None: ROCm.
COMPUTE_CAPABILITY: dict[str, tuple[int, int] | None] = {
    "a10g": (8, 6),
    "l4": (8, 9),
    "l40s": (8, 9),
    "a100-40gb": (8, 0),
    "a100-80gb": (8, 0),
    "h100-sxm": (9, 0),
    "h100-pcie": (9, 0),
    "h200": (9, 0),
    "b200": (10, 0),
    "mi300x": None,
}

# The first release read with the wider sub-35 GiB tier (memory_hook.py).
WIDE_SMALL_TIER_SINCE = (0, 5, 23)

# Page sizes the backends force when left at SGLang's default page of 1.
_FORCED_PAGE = {"trtllm_mha": 64, "trtllm_mla": 64, "flashmla": 64, "cutlass_mla": 128}


@dataclass(frozen=True)
class MemoryTier:
    """What SGLang sets from the GPU's memory when the launch does not."""

    chunked_prefill_size: int
    cuda_graph_max_bs: int


def memory_tier(memory_gib: float, tp: int = 1, version: str | None = None) -> MemoryTier:
    """chunked_prefill_size and the decode CUDA-graph cap of a GPU with `memory_gib` GiB.

    SGLang compares MiB (torch's total_memory / 2^20) with 20, 35, 60, 90 and 160 x 1024.
    """
    mib = memory_gib * 1024
    wide_small = version is None or parse_version(version) >= WIDE_SMALL_TIER_SINCE
    if mib < 20 * 1024:
        return MemoryTier(2048, 8)
    if mib < 35 * 1024:
        if wide_small:
            return MemoryTier(4096, 48 if tp < 4 else 160)
        return MemoryTier(2048, 24 if tp < 4 else 80)
    if mib < 60 * 1024:
        return MemoryTier(4096, 32 if tp < 4 else 160)
    if mib < 160 * 1024:  # H100, A100-80GB (< 90 GiB) and H20, H200: the same values
        return MemoryTier(8192, 256 if tp < 4 else 512)
    return MemoryTier(16384, 512)  # B200, MI300X


def attention_backend(gpu_id: str, arch: ModelArch, tp: int = 1) -> str:
    """The attention backend SGLang 0.5.9 picks for `arch` on `gpu_id` when not told (on ROCm
    an MLA model takes aiter at 16 or 128 KV heads per rank: model_config.get_num_kv_heads)."""
    cc = COMPUTE_CAPABILITY.get(gpu_id.split("-mig-")[0], (0, 0))  # a MIG slice: its GPU's
    hopper = cc is not None and cc[0] == 9
    sm100 = cc is not None and cc[0] == 10
    if arch.model_type == "gpt_oss":
        return "trtllm_mha" if sm100 else "fa3" if hopper else "triton"
    if arch.attention.is_mla:
        if arch.model_type == "deepseek_v3" and sm100:
            return "trtllm_mla"
        if hopper:
            return "fa3"
        if sm100:
            return "flashinfer"
        if cc is None:
            return "aiter" if max(1, arch.attention.kv_heads // tp) in (16, 128) else "triton"
        return "triton"
    if hopper:
        return "fa3"
    if sm100:
        return "trtllm_mha"
    if cc is None:
        return "aiter"
    return "flashinfer"


def page_size(backend: str) -> int:
    """The KV page SGLang runs `backend` with when the launch leaves --page-size at 1."""
    return _FORCED_PAGE.get(backend, 1)


def launch_page_size(gpu_id: str, arch: ModelArch, tp: int = 1) -> int:
    """The page size of a default SGLang launch of `arch` on `gpu_id`."""
    return page_size(attention_backend(gpu_id, arch, tp))
