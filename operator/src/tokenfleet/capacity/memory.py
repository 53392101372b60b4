"""Per-GPU memory of one replica layout (TP x PP) and the KV-cache tokens it leaves.

`evaluate()` is the inner loop of the planner: given a layout and engine settings it
returns, for the most constrained pipeline stage, the memory breakdown, the KV tokens the
engine would log, and the max concurrency at max_model_len.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from tokenfleet.capacity.architecture import ModelArch
from tokenfleet.capacity.engine_profiles import EngineProfile, engine_facts
from tokenfleet.capacity.gpus import GPU
from tokenfleet.capacity.kv import (
    layer_token_bytes,
    stage_layers,
    vllm_layout,
    vllm_max_concurrency,
    vllm_tokens,
)
from tokenfleet.capacity.lora import LoraSlots, stage_bytes
from tokenfleet.capacity.quantization import WeightFormat
from tokenfleet.capacity.speculative import Draft
from tokenfleet.capacity.types import GIB, MemoryBreakdown

CUDA_CONTEXT_GIB = 0.6  # CUDA context + allocator slack outside any engine budget


@dataclass(frozen=True)
class Layout:
    tp: int
    pp: int


@dataclass(frozen=True)
class Settings:
    memory_fraction: float
    max_model_len: int
    max_num_batched_tokens: int
    max_num_seqs: int
    kv_bytes: float  # bytes per KV element
    # MoE experts placed whole on the TP ranks (vLLM --enable-expert-parallel, SGLang
    # --ep-size = TP) instead of each one sliced across them.
    expert_parallel: bool = False
    # LoRA adapter slots the engine preallocates (capacity/lora.py); None: LoRA off.
    lora: LoraSlots | None = None
    # The speculative proposer's weights and KV (capacity/speculative.py); None: off.
    draft: Draft | None = None


@dataclass(frozen=True)
class Evaluation:
    layout: Layout
    memory: MemoryBreakdown  # the stage with the fewest KV tokens
    kv_tokens: int
    kv_bytes_per_token: int
    max_concurrency: float
    weights_total: float


def expert_share(arch: ModelArch, tp: int, expert_parallel: bool) -> float:
    """Share of the routed experts' weights one rank holds: 1/tp of each expert, or with
    expert parallelism whole experts, ceil(E / tp) of E on the most loaded rank."""
    if expert_parallel and arch.moe:
        return math.ceil(arch.moe.experts / tp) / arch.moe.experts
    return 1 / tp


def weights_per_stage(
    arch: ModelArch, fmt: WeightFormat, tp: int, pp: int, expert_parallel: bool = False
) -> list[float]:
    """Bytes of weights on one rank of each pipeline stage (plus the RoPE cos/sin cache)."""
    p = arch.params
    # per_layer is divided by tp below; the experts' term is scaled to their own share
    # (x 1 without expert parallelism).
    per_layer = (
        p.attention * fmt.bytes_for("attention")
        + p.dense_mlp * fmt.bytes_for("dense_mlp")
        + p.experts * fmt.bytes_for("experts") * expert_share(arch, tp, expert_parallel) * tp
        + p.shared_experts_and_router * fmt.bytes_for("shared_experts_and_router")
        + (p.norms - arch.hidden) * fmt.dtype_bytes
    ) / arch.layers
    a = arch.attention
    replicated_kv = 0.0
    if not a.is_mla and tp > a.kv_heads:
        # Each rank holds a whole KV head's projection instead of a 1/tp share of them.
        kv_proj = 2 * arch.hidden * a.head_dim * fmt.bytes_for("attention")
        replicated_kv = (
            kv_proj - 2 * arch.hidden * a.kv_heads * a.head_dim * fmt.bytes_for("attention") / tp
        )
    rotary = a.qk_rope_head_dim if a.is_mla else a.head_dim
    rope_copies = 2 if arch.model_type.startswith("gemma3") else 1  # local + global RoPE
    rope = arch.max_context * rotary * fmt.dtype_bytes * rope_copies
    embed = p.embedding * fmt.dtype_bytes
    head = (p.lm_head or (p.embedding if pp > 1 else 0)) * fmt.dtype_bytes
    stages = []
    for s, (full, sliding) in enumerate(stage_layers(arch, pp)):
        n = full + sliding
        rank = n * per_layer / tp + n * replicated_kv + rope
        if s == 0:
            rank += (embed + p.vision * fmt.dtype_bytes) / tp
        if s == pp - 1:
            rank += (head + arch.hidden * fmt.dtype_bytes) / tp
        stages.append(rank)
    return stages


def moe_workspace_per_token(hidden: int, expert_intermediate: int, tp: int, topk: int) -> float:
    """Elements per token of vLLM's fused-MoE workspaces (TritonExperts.workspace_shapes):
    workspace13 (topk x max(I/tp, hidden), reused for the output) and workspace2 (topk x
    max(2 I/tp, hidden)) are live at once. Fine-grained experts (I/tp below hidden, e.g.
    DeepSeek-V3 at TP 8) make both hidden-wide: twice what gate/up + activation would take."""
    shard = expert_intermediate / tp
    return topk * (max(shard, hidden) + max(2 * shard, hidden))


def activation_bytes(
    arch: ModelArch, profile: EngineProfile, tp: int, s: Settings, last_stage: bool, act_b: float
) -> float:
    """Peak activation of the engine's profile run on one rank."""
    if arch.moe:
        m = arch.moe
        # Expert parallelism keeps each expert whole: its workspaces are unsliced.
        slices = 1 if s.expert_parallel else tp
        mlp = moe_workspace_per_token(
            arch.hidden, m.expert_intermediate, slices, m.experts_per_token
        )
        mlp = max(mlp, 3 * arch.intermediate / tp) if m.first_dense_layers else mlp
    else:
        mlp = 3 * arch.intermediate / tp
    forward = s.max_num_batched_tokens * (4 * arch.hidden + mlp) * act_b * profile.forward_factor
    sampler = s.max_num_seqs * arch.vocab * 4 * profile.sampler_factor if last_stage else 0.0
    return forward + sampler if profile.activation_peaks_add else max(forward, sampler)


def cuda_graph_bytes(layers: int, tp: int) -> float:
    """Rough CUDA-graph pool size: 0.1-3.5 GiB observed, growing with depth and TP."""
    return (0.15 + 0.012 * layers * (1.3 if tp > 1 else 1.0)) * GIB


def evaluate(
    arch: ModelArch,
    gpu: GPU,
    profile: EngineProfile,
    fmt: WeightFormat,
    layout: Layout,
    s: Settings,
) -> Evaluation:
    total = gpu.memory_gib * GIB
    weights = weights_per_stage(arch, fmt, layout.tp, layout.pp, s.expert_parallel)
    act_b = min(fmt.dtype_bytes, 2.0)
    lora = [0.0] * layout.pp
    if s.lora is not None:
        # In the model's dtype (vLLM's lora_dtype "auto", SGLang's model_runner dtype).
        lora = stage_bytes(
            arch, s.lora, profile.engine, layout.tp, layout.pp, fmt.dtype_bytes, s.expert_parallel
        )
    best: Evaluation | None = None
    for stage, ((full, sliding), w) in enumerate(
        zip(stage_layers(arch, layout.pp), weights, strict=True)
    ):
        last = stage == layout.pp - 1
        # The drafter lives with the last pipeline stage (vLLM builds it on the last PP
        # rank: gpu_model_runner.py), beside the LM head whose hidden states it reads.
        draft = s.draft if last else None
        at = _Stage(arch, profile, layout, s, total, w, lora[stage], draft)
        if not engine_facts(profile.engine).profile_run:
            ev = _sglang_stage(at, full + sliding)
        else:
            ev = _vllm_stage(
                at, activation_bytes(arch, profile, layout.tp, s, last, act_b), full, sliding
            )
        if best is None or ev.kv_tokens < best.kv_tokens:
            best = ev
    assert best is not None
    return Evaluation(
        best.layout,
        best.memory,
        best.kv_tokens,
        best.kv_bytes_per_token,
        best.max_concurrency,
        sum(weights) * layout.tp,
    )


@dataclass(frozen=True)
class _Stage:
    """One pipeline stage's memory inputs: what both engines' budgets start from."""

    arch: ModelArch
    profile: EngineProfile
    layout: Layout
    s: Settings
    total: float  # the GPU's bytes
    weights: float
    lora: float
    draft: Draft | None


def _vllm_stage(at: _Stage, act: float, full: int, sliding: int) -> Evaluation:
    arch, profile, layout, s = at.arch, at.profile, at.layout, at.s
    total, weights, lora, draft = at.total, at.weights, at.lora, at.draft
    budget = total * s.memory_fraction
    non_torch = profile.non_torch_gib(layout.tp) * GIB
    graphs = cuda_graph_bytes(full + sliding, layout.tp)
    in_budget = graphs if profile.cuda_graphs_in_budget else 0.0
    drafted = draft.weight_bytes if draft else 0.0
    kv = budget - weights - drafted - lora - act - non_torch - in_budget
    kv_layout = vllm_layout(arch, full, sliding, layout.tp, s.kv_bytes)
    blocks, tokens = vllm_tokens(kv_layout, max(kv, 0.0))
    per_token = kv_layout.bytes_per_token
    if draft is not None and draft.kv_bytes_per_token:
        # The drafter's layers join the KV-cache spec (get_kv_cache_spec): every token
        # keeps their KV too, in the same blocks.
        per_token += draft.kv_bytes_per_token
        size = kv_layout.block_size
        blocks = int(max(kv, 0.0) // (per_token * size))
        tokens = blocks * size
    concurrency = vllm_max_concurrency(
        kv_layout, blocks, s.max_model_len, arch.sliding_window, s.max_num_batched_tokens
    )
    memory = MemoryBreakdown(
        budget=budget,
        weights=weights,
        activation=act,
        non_torch=non_torch,
        cuda_graphs=graphs,
        kv_cache=kv,
        cuda_graphs_in_budget=profile.cuda_graphs_in_budget,
        lora=lora,
        draft=drafted,
    )
    return Evaluation(layout, memory, tokens, per_token, concurrency, 0.0)


def _sglang_stage(at: _Stage, layers: int) -> Evaluation:
    arch, profile, layout, s = at.arch, at.profile, at.layout, at.s
    total, weights, lora, draft = at.total, at.weights, at.lora, at.draft
    init = (profile.init_overhead_gib + profile.init_overhead_per_rank_gib * layout.tp) * GIB
    free_at_start = total - init
    drafted = draft.weight_bytes if draft else 0.0
    rest = free_at_start * s.memory_fraction - weights - drafted - lora
    cell = layers * layer_token_bytes(arch, layout.tp, s.kv_bytes)
    if draft is not None and draft.kv_layers:
        # SGLang widens each token's cell by the target's per-layer size times the draft's
        # layers (pool_configurator.py DefaultPoolConfigurator: EAGLE / STANDALONE).
        cell += int(cell * draft.kv_layers / max(layers, 1))
    tokens = int(max(rest, 0.0) // cell)
    memory = MemoryBreakdown(
        budget=free_at_start * s.memory_fraction,
        weights=weights,
        activation=free_at_start * (1 - s.memory_fraction),
        non_torch=init,
        cuda_graphs=0.0,
        kv_cache=rest,
        cuda_graphs_in_budget=True,
        lora=lora,
        draft=drafted,
    )
    return Evaluation(layout, memory, tokens, cell, tokens / s.max_model_len, 0.0)
