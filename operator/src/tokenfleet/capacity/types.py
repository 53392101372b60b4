"""The planner's input and output records (what the operator, the simulator and the CLI use)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from tokenfleet.capacity.architecture import ModelArch
from tokenfleet.capacity.disagg.request import ServingRequest
from tokenfleet.capacity.gpus import GPU
from tokenfleet.capacity.lora import LoraRequest, LoraSlots
from tokenfleet.capacity.speculative import SpeculativePlan, SpeculativeRequest

if TYPE_CHECKING:  # the serving decision's and gpu_choice's records hold Plans
    from tokenfleet.capacity.disagg.types import ServingDecision
    from tokenfleet.capacity.gpu_choice import GpuCandidate, GpuChoice

Engine = Literal["vllm", "sglang"]
# cost: fewest GPUs in total (replicas x GPUs per replica) that hold the target concurrency,
#       or with a target rate, the cheapest fleet that serves it within the SLO;
# min-gpus: the fewest GPUs per replica whose KV cache alone holds the target concurrency;
# latency: the single-node layout with the lowest predicted latency.
Objective = Literal["cost", "min-gpus", "latency"]
GIB = 1024**3

# Workload defaults: the chat shape of the project's source material (2,048 in / 300 out)
# and the SLO of `vllm bench serve --goodput ttft:500 tpot:50`.
DEFAULT_CONCURRENCY = 16
DEFAULT_INPUT_TOKENS = 2048
DEFAULT_OUTPUT_TOKENS = 300
DEFAULT_TTFT_SLO_MS = 500.0
DEFAULT_TPOT_SLO_MS = 50.0


@dataclass(frozen=True)
class PlanRequest:
    """Everything plan() needs. None means "let the planner choose"."""

    arch: ModelArch
    gpu: GPU
    engine: Engine = "vllm"
    engine_version: str | None = None
    tensor_parallel_size: int | None = None
    pipeline_parallel_size: int | None = None
    # vLLM --gpu-memory-utilization or SGLang --mem-fraction-static (same meaning to us:
    # the fraction of GPU memory the engine may plan with).
    memory_fraction: float | None = None
    max_model_len: int | None = None
    max_num_batched_tokens: int | None = None
    max_num_seqs: int | None = None
    kv_cache_dtype: str = "auto"
    dtype: str = "auto"
    quantization: str | None = None
    # MoE only: place whole experts on the TP ranks (vLLM --enable-expert-parallel, SGLang
    # --ep-size = TP) instead of slicing each expert across them.
    expert_parallel: bool = False
    # vLLM --long-prefill-token-threshold, derived from the SLO (capacity/long_prefill.py).
    cap_long_prefills: bool = False
    concurrency: int = DEFAULT_CONCURRENCY
    input_tokens: int = DEFAULT_INPUT_TOKENS
    output_tokens: int = DEFAULT_OUTPUT_TOKENS
    # Share of prompt tokens served from the prefix cache: prefill computes the rest
    # (capacity/prefix.py); memory is still planned on the whole prompt.
    prefix_cache_hit_rate: float = 0.0
    ttft_slo_ms: float = DEFAULT_TTFT_SLO_MS
    tpot_slo_ms: float = DEFAULT_TPOT_SLO_MS
    max_gpus_per_node: int | None = None
    max_nodes: int = 4
    objective: Objective = "cost"
    # With a fixed tensor_parallel_size, pipeline stages are added only when asked (--pp auto).
    pipeline_auto: bool = False
    # Requests/s the whole fleet must serve within the SLO: plan() then sizes the fleet
    # (replicas x layout) by cost and returns it in Plan.fleet.
    target_requests_per_second: float | None = None
    # LoRA adapters served on top of the base model (capacity/lora.py); None: LoRA off.
    lora: LoraRequest | None = None
    # Speculative decoding (capacity/speculative.py); None: off.
    speculative: SpeculativeRequest | None = None
    # Aggregated (one role), disaggregated (prefill + decode roles) or the planner's choice
    # (capacity/disagg).
    serving: ServingRequest = field(default_factory=ServingRequest)
    # GPU types to choose from (capacity/gpu_choice.py): plan() then ranks the types and
    # plans the cheapest; `gpu` is ignored. Empty: plan on `gpu`.
    gpu_candidates: tuple[GpuCandidate, ...] = ()


@dataclass(frozen=True)
class MemoryBreakdown:
    """Per-GPU memory of the most loaded rank, in bytes."""

    budget: float  # total x memory fraction
    weights: float
    activation: float
    non_torch: float  # CUDA/NCCL buffers, communication workspaces
    cuda_graphs: float
    kv_cache: float
    cuda_graphs_in_budget: bool
    lora: float = 0.0  # LoRA adapter slots, preallocated (capacity/lora.py)
    draft: float = 0.0  # the speculative proposer's weights (capacity/speculative.py)

    @property
    def overhead(self) -> float:
        return self.non_torch + self.cuda_graphs

    @property
    def total(self) -> float:
        return (
            self.weights + self.draft + self.lora + self.activation + self.overhead + self.kv_cache
        )

    def gib(self) -> dict[str, float]:
        doc = {
            "weights": round(self.weights / GIB, 2),
            "activation": round(self.activation / GIB, 2),
            "overhead": round(self.overhead / GIB, 2),
            "kvCache": round(self.kv_cache / GIB, 2),
            "total": round(self.total / GIB, 2),
            "budget": round(self.budget / GIB, 2),
        }
        if self.lora:
            doc["lora"] = round(self.lora / GIB, 2)
        if self.draft:
            doc["draft"] = round(self.draft / GIB, 2)
        return doc


@dataclass(frozen=True)
class Prediction:
    """Predicted behaviour of one replica: a closed loop at the target concurrency, and the
    goodput capacity (the open-loop request rate it serves within the SLO)."""

    ttft_ms: float  # median, closed loop at the target concurrency
    tpot_ms: float  # median per-request TPOT, same run
    output_tokens_per_second: float
    requests_per_second: float
    goodput_requests_per_second: float  # highest Poisson rate meeting the SLO (capacity)
    goodput_concurrency: int  # mean requests in flight at that rate (Little's law)
    cost_per_million_output_tokens: float
    concurrency: int = 1  # the target concurrency the first rows were predicted at
    ttft_p95_ms: float = 0.0
    ttft_p99_ms: float = 0.0
    itl_ms: float = 0.0  # median inter-token latency (decode steps, prefill stalls included)
    total_tokens_per_second: float = 0.0
    goodput_ttft_p95_ms: float = 0.0  # p95 TTFT at the goodput rate
    goodput_tpot_ms: float = 0.0  # median TPOT at the goodput rate
    saturation_requests_per_second: float = 0.0  # throughput with every slot busy
    method: str = "scheduler"  # "scheduler": virtual run of the scheduler core

    def as_dict(self) -> dict[str, float | int | str]:
        return {
            "ttftMs": round(self.ttft_ms, 1),
            "tpotMs": round(self.tpot_ms, 2),
            "outputTokensPerSecond": round(self.output_tokens_per_second, 1),
            "requestsPerSecond": round(self.requests_per_second, 3),
            "goodputRequestsPerSecond": round(self.goodput_requests_per_second, 3),
            "goodputConcurrency": self.goodput_concurrency,
            "costPerMillionOutputTokens": round(self.cost_per_million_output_tokens, 3),
            "concurrency": self.concurrency,
            "ttftP95Ms": round(self.ttft_p95_ms, 1),
            "ttftP99Ms": round(self.ttft_p99_ms, 1),
            "itlMs": round(self.itl_ms, 2),
            "totalTokensPerSecond": round(self.total_tokens_per_second, 1),
            "goodputTtftP95Ms": round(self.goodput_ttft_p95_ms, 1),
            "goodputTpotMs": round(self.goodput_tpot_ms, 2),
            "saturationRequestsPerSecond": round(self.saturation_requests_per_second, 3),
        }


@dataclass(frozen=True)
class FleetOption:
    """One way to serve the target rate: `replicas` of one layout."""

    tensor_parallel_size: int
    pipeline_parallel_size: int
    gpus_per_replica: int
    replicas: int
    goodput_requests_per_second: float  # per replica
    ttft_p95_ms: float  # at the target rate spread over the replicas (open loop)
    cost_per_hour: float  # all replicas
    cost_per_million_good_requests: float
    tpot_ms: float = 0.0  # median, at the target rate spread over the replicas
    ttft_p95_at_capacity_ms: float = 0.0  # at the replica's goodput rate (the worst it gets)

    @property
    def total_gpus(self) -> int:
        return self.replicas * self.gpus_per_replica

    def as_dict(self) -> dict[str, float | int]:
        return {
            "replicas": self.replicas,
            "gpusPerReplica": self.gpus_per_replica,
            "totalGpus": self.total_gpus,
            "tensorParallelSize": self.tensor_parallel_size,
            "pipelineParallelSize": self.pipeline_parallel_size,
            "goodputRequestsPerSecond": round(self.goodput_requests_per_second * self.replicas, 3),
            "goodputPerReplica": round(self.goodput_requests_per_second, 3),
            "ttftP95Ms": round(self.ttft_p95_ms, 1),
            "tpotMs": round(self.tpot_ms, 2),
            "ttftP95AtCapacityMs": round(self.ttft_p95_at_capacity_ms, 1),
            "costPerHour": round(self.cost_per_hour, 2),
            "costPerMillionGoodRequests": round(self.cost_per_million_good_requests, 2),
        }


@dataclass(frozen=True)
class Fleet:
    """The answer to "how many GPUs, in what layout, serve R requests/s within the SLO"."""

    target_requests_per_second: float
    chosen: FleetOption
    alternatives: tuple[FleetOption, ...]  # the other layouts considered, cheapest first
    reason: str

    def as_dict(self) -> dict[str, object]:
        doc: dict[str, object] = dict(self.chosen.as_dict())
        doc["targetRequestsPerSecond"] = self.target_requests_per_second
        doc["alternatives"] = [a.as_dict() for a in self.alternatives]
        doc["reason"] = self.reason
        return doc


@dataclass(frozen=True)
class Plan:
    """A sized replica: how to run it, what it holds, and how fast it should be."""

    model: str
    gpu: GPU
    engine: Engine
    engine_version: str
    engine_profile: str
    tensor_parallel_size: int
    pipeline_parallel_size: int
    gpus_per_replica: int
    nodes_per_replica: int
    memory_fraction: float  # --gpu-memory-utilization (vLLM) / --mem-fraction-static (SGLang)
    max_model_len: int
    max_num_seqs: int
    max_num_batched_tokens: int
    kv_cache_dtype: str
    dtype: str
    quantization: str | None
    kv_cache_tokens: int
    kv_bytes_per_token: int  # per rank, summed over that rank's layers
    max_concurrency: float  # requests of max_model_len tokens the KV cache holds at once
    weights_total_bytes: float
    params_total: int
    params_active: int
    memory: MemoryBreakdown
    predicted: Prediction
    reason: str  # one line: why this TP / PP
    warnings: tuple[str, ...] = ()
    request: PlanRequest | None = field(default=None, compare=False, repr=False)
    fleet: Fleet | None = None  # set when the request gives a target rate
    expert_parallel: bool = False  # MoE experts whole on the TP ranks (PlanRequest's)
    # vLLM's --long-prefill-token-threshold (capacity/long_prefill.py); 0: not set
    long_prefill_token_threshold: int = 0
    lora: LoraSlots | None = None  # the adapter slots the engine preallocates
    speculative: SpeculativePlan | None = None  # the proposer, and whether it runs
    # The aggregated / disaggregated comparison (a request whose serving mode is not
    # aggregated); with mode disaggregated this plan is the decode role's and the decision
    # holds both roles.
    serving: ServingDecision | None = field(default=None, compare=False, repr=False)
    # The comparison of GPU types this plan won (a request with gpu_candidates), else None.
    choice: GpuChoice | None = field(default=None, compare=False, repr=False)

    def as_dict(self) -> dict[str, Any]:
        """The JSON contract of `tokenfleet plan -o json` (engineArgs are added by engines)."""
        return {
            "model": self.model,
            "gpu": self.gpu.id,
            "engine": self.engine,
            "engineVersion": self.engine_version,
            "engineProfile": self.engine_profile,
            "tensorParallelSize": self.tensor_parallel_size,
            "pipelineParallelSize": self.pipeline_parallel_size,
            "gpusPerReplica": self.gpus_per_replica,
            "nodesPerReplica": self.nodes_per_replica,
            "gpuMemoryUtilization": self.memory_fraction,
            "maxNumSeqs": self.max_num_seqs,
            "maxNumBatchedTokens": self.max_num_batched_tokens,
            "longPrefillTokenThreshold": self.long_prefill_token_threshold,
            "maxModelLen": self.max_model_len,
            "kvCacheDtype": self.kv_cache_dtype,
            "expertParallel": self.expert_parallel,
            "kvCacheTokens": self.kv_cache_tokens,
            "kvBytesPerToken": self.kv_bytes_per_token,
            "maxConcurrency": round(self.max_concurrency, 2),
            "parameters": {"total": self.params_total, "active": self.params_active},
            "weightsTotalGiB": round(self.weights_total_bytes / GIB, 2),
            "memory": self.memory.gib(),
            "predicted": self.predicted.as_dict(),
            "reason": self.reason,
            "warnings": list(self.warnings),
            **({"fleet": self.fleet.as_dict()} if self.fleet else {}),
            **({"lora": self.lora.as_dict()} if self.lora else {}),
            **({"speculative": self.speculative.as_dict()} if self.speculative else {}),
            **({"serving": self.serving.as_dict()} if self.serving else {}),
            **({"gpuChoice": self.choice.as_dict()} if self.choice else {}),
        }
