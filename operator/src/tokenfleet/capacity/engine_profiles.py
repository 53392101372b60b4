"""How each engine version spends GPU memory besides weights and KV cache.

One record per engine-version family, with every constant the memory model uses. The
constants are fitted to the printed numbers in reference/engines.md (calibration table) and
the overhead ranges it reports; the unit test test_calibration.py checks the fit.

- vLLM measures weights + peak activation + non-torch memory in a profile run and gives the
  rest of `total x gpu_memory_utilization` to the KV cache. The profile's peak is either the
  forward pass over max_num_batched_tokens or the dummy sampler run over max_num_seqs
  logits (float32, plus softmax / sort buffers: `sampler_factor` copies), whichever is
  larger in the V1 engine of 0.12+; 0.9-0.11 held both at once and their forward peak was
  larger (`forward_factor`), matching the 4.8-7.4 GiB observed at 16K batched tokens.
- CUDA graphs sit outside the budget up to 0.20 and inside it from 0.21.
- SGLang: max_total_num_tokens = (free_after_weights - total x (1 - mem_fraction_static)) //
  cell_size; `init_overhead` is what the CUDA context and NCCL take before the first free
  memory reading.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, cast

from tokenfleet.capacity.errors import PlanError
from tokenfleet.capacity.gpus import GPU
from tokenfleet.capacity.kernels import STEP_OVERHEAD_S

if TYPE_CHECKING:
    from tokenfleet.capacity.types import Engine

DEFAULT_VERSIONS = {"vllm": "0.32.0", "sglang": "0.5.23"}
# The first vLLM whose scheduler was read admitting a request only when its whole sequence
# fits (EngineProfile.reserve_full_sequence).
RESERVE_FULL_SEQUENCE_SINCE = (0, 32, 0)
GIB = 1024**3


@dataclass(frozen=True)
class EngineFacts:
    """What the planner and its callers decide by engine kind, the same at every version.

    Here, below the engine registry (engines/registry.py), because the capacity model reads
    them and engines/ imports capacity; the registry's record carries them as `facts`.
    """

    # The flag that sets the share of GPU memory the engine takes.
    memory_flag: str
    # True: the engine sizes its KV cache from a profile run under a utilization budget
    # (vLLM: forward and sampler peaks, CUDA graphs beside it). False: from a static pool
    # after the weights, whose default fraction the engine computes itself (SGLang).
    profile_run: bool
    # Whether it starts with a KV pool smaller than its context length, rejecting the
    # requests that do not fit (SGLang), instead of refusing to start (vLLM).
    starts_below_context: bool
    # Whether prefill chunks share a step with decodes (SGLang runs prefill batches its
    # decodes wait for).
    mixed_prefill: bool
    # Whether its CPU n-gram proposer turns async scheduling off (vllm/config/vllm.py).
    ngram_stops_async: bool
    # Whether it has a per-step cap on a long prompt's chunk (--long-prefill-token-threshold).
    long_prefill_cap: bool
    # LoRA: the flag that sets the adapter slots; whether the base model's requests take a
    # slot of their own (SGLang's mem_pool.py prepare_lora_batch); whether only the ranks of
    # its kernels are accepted (lora.VLLM_RANKS); whether every pipeline stage holds every
    # layer's buffers and the embedding's and LM head's (SGLang); whether the LM head's B is
    # split by TP (SGLang; vLLM keeps the whole vocabulary on every rank); whether adapters
    # can be pinned in their slots.
    lora_slots_flag: str
    lora_base_slot: bool
    lora_fixed_ranks: bool
    lora_every_stage: bool
    lora_head_split: bool
    lora_pinning: bool
    # Whether its attention backend, not a fixed block size, sets the KV page on a GPU
    # (SGLang: sglang_defaults.launch_page_size).
    page_set_by_backend: bool
    # Disaggregated serving: the KV transfer backends it renders, and whether its connector
    # wants equal TP on both roles for a model without MLA (SGLang, capacity/disagg/rules.py).
    transfer_backends: tuple[str, ...]
    pd_equal_tp_unless_mla: bool


ENGINE_FACTS: dict[str, EngineFacts] = {
    "vllm": EngineFacts(
        memory_flag="gpu-memory-utilization",
        profile_run=True,
        starts_below_context=False,
        mixed_prefill=True,
        ngram_stops_async=True,
        long_prefill_cap=True,
        lora_slots_flag="--max-loras",
        lora_base_slot=False,
        lora_fixed_ranks=True,
        lora_every_stage=False,
        lora_head_split=False,
        lora_pinning=False,
        page_set_by_backend=False,
        transfer_backends=("nixl",),
        pd_equal_tp_unless_mla=False,
    ),
    "sglang": EngineFacts(
        memory_flag="mem-fraction-static",
        profile_run=False,
        starts_below_context=True,
        mixed_prefill=False,
        ngram_stops_async=False,
        long_prefill_cap=False,
        lora_slots_flag="--max-loras-per-batch",
        lora_base_slot=True,
        lora_fixed_ranks=False,
        lora_every_stage=True,
        lora_head_split=True,
        lora_pinning=True,
        page_set_by_backend=True,
        transfer_backends=("nixl", "mooncake"),
        pd_equal_tp_unless_mla=True,
    ),
}


def modelled_kind(engine: str) -> Engine:
    """`engine` as a kind the capacity model knows: any other is modelled as vLLM."""
    return cast("Engine", engine if engine in ENGINE_FACTS else "vllm")


def engine_facts(engine: str) -> EngineFacts:
    """The facts of engine kind `engine`; a PlanError naming the field for an unknown one."""
    try:
        return ENGINE_FACTS[engine]
    except KeyError:
        raise PlanError("engine", engine, "unknown engine", "use vllm or sglang") from None


@dataclass(frozen=True)
class EngineProfile:
    engine: str
    name: str
    version: str
    forward_factor: float
    sampler_factor: float
    activation_peaks_add: bool  # True: forward and sampler peaks coexist (0.9-0.11)
    non_torch_tp1_gib: float
    non_torch_base_gib: float  # TP >= 2: custom all-reduce + NCCL buffers
    non_torch_per_rank_gib: float
    cuda_graphs_in_budget: bool
    default_memory_fraction: float
    block_size: int = 16
    init_overhead_gib: float = 0.0  # SGLang: CUDA context + NCCL before its first reading
    init_overhead_per_rank_gib: float = 0.0
    # vLLM V1's AsyncScheduler: the CPU side of step N+1 (scheduling, output processing)
    # overlaps step N on the GPU, so it adds no time per step. On by default from vLLM 0.12
    # (vllm-project/vllm#27614) unless pipeline parallelism is on (0.32's
    # vllm/config/vllm.py: "Async scheduling is disabled because the V1 model runner does
    # not support it with pipeline parallelism").
    async_scheduling: bool = False
    # The scheduler's admission rules (tokenfleet.scheduling.core.SchedulerConfig), checked
    # against vLLM 0.32's own scheduler by the system test of the scheduler core:
    # - prefix caching, on by default in the V1 engine (vllm/config/cache.py
    #   enable_prefix_caching = True): a preempted request comes back with its own
    #   surviving blocks cached;
    # - the whole sequence must fit before a waiting request is admitted
    #   (scheduler_reserve_full_isl, vllm/config/scheduler.py, default True in 0.32). It
    #   came as an opt-in (vllm-project/vllm#37307, merged 2026-03: "The default behaviour
    #   of vLLM is to schedule requests if the first chunk of a request fits"); the first
    #   release with it on by default was not pinned down, so it is taken from 0.32, the
    #   release read here (RESERVE_FULL_SEQUENCE_SINCE).
    # SGLang's PrefillAdder admits a request only with its whole output and the running
    # requests' remaining outputs in free tokens (scheduling/core.py SchedulerConfig).
    prefix_caching: bool = False
    reserve_full_sequence: bool = False
    reserve_outputs: bool = False

    def step_overhead_s(self, pp: int) -> float:
        """The engine's CPU time a step adds to the GPU's (kernels.STEP_OVERHEAD_S)."""
        return 0.0 if self.async_scheduling and pp <= 1 else STEP_OVERHEAD_S

    def non_torch_gib(self, tp: int) -> float:
        if tp <= 1:
            return self.non_torch_tp1_gib
        return self.non_torch_base_gib + self.non_torch_per_rank_gib * tp


def parse_version(version: str, field: str = "engine-version") -> tuple[int, int, int]:
    match = re.match(r"^v?(\d+)\.(\d+)(?:\.(\d+))?", version.strip())
    if not match:
        raise PlanError(
            field, version, "not a version number", "use MAJOR.MINOR[.PATCH], e.g. 0.11.0"
        )
    major, minor, patch = match.groups()
    return int(major), int(minor), int(patch or 0)


_VLLM_LEGACY = EngineProfile(
    engine="vllm",
    name="vllm-0.9-0.11",
    version="",
    forward_factor=2.8,
    sampler_factor=4.0,
    activation_peaks_add=True,
    non_torch_tp1_gib=0.35,
    non_torch_base_gib=2.0,
    non_torch_per_rank_gib=0.13,
    cuda_graphs_in_budget=False,
    default_memory_fraction=0.90,
    prefix_caching=True,
)
_VLLM_V1 = replace(
    _VLLM_LEGACY,
    name="vllm-0.12-0.20",
    forward_factor=1.0,
    activation_peaks_add=False,
    async_scheduling=True,
)
_VLLM_NEWER = replace(
    _VLLM_V1, name="vllm-0.21+", cuda_graphs_in_budget=True, default_memory_fraction=0.92
)


_SGLANG = EngineProfile(
    engine="sglang",
    name="sglang",
    version="",
    forward_factor=1.0,
    sampler_factor=4.0,
    activation_peaks_add=False,
    non_torch_tp1_gib=0.0,
    non_torch_base_gib=0.0,
    non_torch_per_rank_gib=0.0,
    cuda_graphs_in_budget=False,
    default_memory_fraction=0.85,
    block_size=1,
    init_overhead_gib=0.45,
    init_overhead_per_rank_gib=0.07,
    reserve_outputs=True,
)


def _vllm_profile(resolved: str, v: tuple[int, int, int]) -> EngineProfile:
    if v < (0, 9, 0):
        raise PlanError(
            "engine-version",
            resolved,
            "vLLM before 0.9 (V0 engine) is not modelled",
            "use vLLM 0.9 or newer",
        )
    family = _VLLM_LEGACY if v < (0, 12, 0) else _VLLM_V1 if v < (0, 21, 0) else _VLLM_NEWER
    return replace(family, version=resolved, reserve_full_sequence=v >= RESERVE_FULL_SEQUENCE_SINCE)


def _sglang_profile(resolved: str, v: tuple[int, int, int]) -> EngineProfile:
    return replace(_SGLANG, version=resolved)


_PROFILES = {"vllm": _vllm_profile, "sglang": _sglang_profile}


def engine_profile(engine: str, version: str | None = None) -> EngineProfile:
    if engine not in DEFAULT_VERSIONS:
        raise PlanError("engine", engine, "unknown engine", "use vllm or sglang")
    resolved = version or DEFAULT_VERSIONS[engine]
    return _PROFILES[engine](resolved, parse_version(resolved))


def default_batch_limits(engine: str, gpu: GPU, version: str | None = None) -> tuple[int, int]:
    """(max_num_batched_tokens, max_num_seqs) the engine picks when not told.

    vLLM's OpenAI server: 8192 / 1024 on large non-A100 GPUs, else 2048 / 256.
    SGLang: chunked_prefill_size by its GPU-memory tier (sglang_defaults.memory_tier).
    """
    return _BATCH_LIMITS.get(engine, _vllm_batch_limits)(gpu, version)


def _vllm_batch_limits(gpu: GPU, version: str | None) -> tuple[int, int]:
    return (8192, 1024) if gpu.large else (2048, 256)


def _sglang_batch_limits(gpu: GPU, version: str | None) -> tuple[int, int]:
    from tokenfleet.capacity.sglang_defaults import memory_tier  # it reads parse_version

    chunk = memory_tier(gpu.memory_gib, 1, version).chunked_prefill_size
    return chunk, 1024 if gpu.large else 256


_BATCH_LIMITS = {"vllm": _vllm_batch_limits, "sglang": _sglang_batch_limits}


def sglang_default_mem_fraction(
    gpu: GPU, chunked_prefill: int, tp: int, pp: int, version: str | None = None
) -> float:
    """SGLang's own default mem_fraction_static (server_args), per reference/engines.md.

    Before 0.5.3 the reserve was a fixed amount per GPU-memory tier (sglang 0.5.1.post1 and
    0.5.2, srt/server_args.py ServerArgs.__post_init__ "Set mem fraction static"); from 0.5.3
    it is sized from the chunk and the CUDA graphs (_handle_gpu_memory_settings).
    """
    total_mb = gpu.memory_gib * 1024
    if version is not None and parse_version(version) < (0, 5, 3):
        reserved_mb = _sglang_tier_reserve_mb(total_mb, tp * pp)
        return round((total_mb - reserved_mb) / total_mb, 3)
    from tokenfleet.capacity.sglang_defaults import memory_tier  # it reads parse_version

    cuda_graph_max_bs = memory_tier(gpu.memory_gib, tp, version).cuda_graph_max_bs
    reserved_mb = 512 + max(chunked_prefill, 2048) * 1.5 + cuda_graph_max_bs * 2
    reserved_mb += tp * pp / 8 * 1024
    if gpu.memory_gib > 60:
        reserved_mb = max(reserved_mb, 10 * 1024)
    return round((total_mb - reserved_mb) / total_mb, 3)


def _sglang_tier_reserve_mb(total_mb: float, parallel_size: int) -> float:
    """SGLang 0.5.1.post1 / 0.5.2's reserve: GB per memory tier plus a share per rank."""
    if total_mb < 35 * 1024:
        return (2.8 + parallel_size / 10) * 1024
    if total_mb < 90 * 1024:
        return (9.5 + parallel_size / 2) * 1024
    if total_mb < 160 * 1024:
        return (12 + parallel_size / 2) * 1024
    return 32 * 1024
