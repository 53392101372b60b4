"""KV-cache geometry: bytes per token per rank, and how engines turn bytes into tokens.

vLLM (V1) pages the cache in blocks; layers that share a spec form groups, and for hybrid
models (sliding + full attention) groups are padded to a common size, which is why Gemma 3
holds fewer tokens than "bytes / bytes-per-token-over-all-layers" suggests. SGLang keeps one
token-granular pool: tokens = bytes // cell_size.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from tokenfleet.capacity.architecture import ModelArch
from tokenfleet.capacity.errors import PlanError

KV_DTYPE_BYTES = {"auto": None, "fp8": 1.0, "fp8_e4m3": 1.0, "fp8_e5m2": 1.0}
MLA_BLOCK_SIZE = 64  # FlashMLA pages hold 64 tokens


def kv_dtype_bytes(kv_cache_dtype: str, weight_dtype_bytes: float) -> float:
    if kv_cache_dtype not in KV_DTYPE_BYTES:
        raise PlanError(
            "kv-cache-dtype",
            kv_cache_dtype,
            "unknown KV cache dtype",
            f"use one of {', '.join(KV_DTYPE_BYTES)}",
        )
    return KV_DTYPE_BYTES[kv_cache_dtype] or min(weight_dtype_bytes, 2.0)


def kv_heads_per_rank(arch: ModelArch, tp: int) -> int:
    """KV heads each TP rank stores; replicated (1 per rank) when TP exceeds the KV heads."""
    return max(1, arch.attention.kv_heads // tp)


def layer_token_bytes(arch: ModelArch, tp: int, kv_bytes: float) -> int:
    """Bytes one token takes in one layer on one rank."""
    a = arch.attention
    if a.is_mla:
        # The MLA latent is not split across TP ranks: every rank keeps all of it.
        return int((a.kv_lora_rank + a.qk_rope_head_dim) * kv_bytes)
    return int(2 * kv_heads_per_rank(arch, tp) * a.head_dim * kv_bytes)


def stage_layers(arch: ModelArch, pp: int) -> list[tuple[int, int]]:
    """(full_layers, sliding_layers) per pipeline stage, split as vLLM splits them."""
    base, extra = divmod(arch.layers, pp)
    stages, start = [], 0
    for s in range(pp):
        count = base + (1 if s >= pp - extra else 0)  # vLLM gives remainders to the last stages
        sliding = arch.sliding_between(start, start + count)
        stages.append((count - sliding, sliding))
        start += count
    return stages


@dataclass(frozen=True)
class KVLayout:
    """How one rank's KV memory turns into tokens."""

    block_size: int
    page_bytes: int  # one block of one layer
    group_size: int  # layers per KV-cache group (vLLM pads every group to this size)
    num_groups: int
    full_layers: int
    sliding_layers: int

    @property
    def layer_slots(self) -> int:
        """Layers' worth of memory a token takes: >= the layer count when groups are padded."""
        return self.group_size * self.num_groups

    @property
    def bytes_per_token(self) -> int:
        return self.layer_slots * self.page_bytes // self.block_size


def vllm_layout(arch: ModelArch, full: int, sliding: int, tp: int, kv_bytes: float) -> KVLayout:
    block = MLA_BLOCK_SIZE if arch.attention.is_mla else 16
    page = block * layer_token_bytes(arch, tp, kv_bytes)
    counts = [c for c in (full, sliding) if c]
    group_size = min(counts)
    if max(counts) < group_size * 1.25:
        group_size = max(counts)
    groups = sum(math.ceil(c / group_size) for c in counts)
    return KVLayout(block, page, group_size, groups, full, sliding)


def vllm_tokens(layout: KVLayout, available_bytes: float) -> tuple[int, int]:
    """(num_blocks in the shared pool, tokens vLLM logs as "GPU KV cache size")."""
    num_blocks = int(available_bytes // (layout.page_bytes * layout.group_size))
    return num_blocks, num_blocks // layout.num_groups * layout.block_size


def vllm_max_concurrency(
    layout: KVLayout, num_blocks: int, max_len: int, window: int, batched_tokens: int
) -> float:
    """vLLM's "Maximum concurrency for L tokens per request": a sliding layer needs only
    min(window - 1 + max_num_batched_tokens, L) tokens (+1 block of slack)."""
    b = layout.block_size
    counts = [(layout.full_layers, False), (layout.sliding_layers, True)]
    blocks = 0
    for count, is_sliding in counts:
        if not count:
            continue
        per_group = (
            math.ceil(min(window - 1 + batched_tokens, max_len) / b) + 1
            if is_sliding
            else math.ceil(max_len / b)
        )
        blocks += math.ceil(count / layout.group_size) * per_group
    return num_blocks / blocks if blocks else 0.0
