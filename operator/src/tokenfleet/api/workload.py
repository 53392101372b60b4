"""spec.workload and spec.slo: the traffic a replica is sized for, and the latency target."""

from __future__ import annotations

from pydantic import Field

from tokenfleet.api.base import SpecModel
from tokenfleet.capacity.types import (
    DEFAULT_CONCURRENCY,
    DEFAULT_INPUT_TOKENS,
    DEFAULT_OUTPUT_TOKENS,
    DEFAULT_TPOT_SLO_MS,
    DEFAULT_TTFT_SLO_MS,
)


class WorkloadSpec(SpecModel):
    """The request shape one replica is planned for."""

    max_model_len: int | None = Field(default=None, ge=16, le=10_485_760)
    """Longest prompt + output, in tokens. Default: planned (the model's context length when
    the KV cache fits at least one such request)."""
    concurrency: int = Field(default=DEFAULT_CONCURRENCY, ge=1, le=65536)
    """Concurrent requests one replica should hold."""
    input_tokens: int = Field(default=DEFAULT_INPUT_TOKENS, ge=1, le=10_485_760)
    """Typical prompt length."""
    output_tokens: int = Field(default=DEFAULT_OUTPUT_TOKENS, ge=1, le=10_485_760)
    """Typical output length."""
    target_requests_per_second: float | None = Field(default=None, gt=0, le=1_000_000)
    """Requests/s the whole service must serve within the SLO. When set, the planner compares
    layouts (TP 1 x N replicas, TP 2 x N/2, ...) and picks the cheapest fleet; the plan status
    reports its replicas and GPUs."""
    prefix_cache_hit_rate: float = Field(default=0.0, ge=0, le=0.95)
    """Fraction of prompt tokens served from the engines' prefix cache (shared system
    prompts, multi-turn chat; higher with spec.routing's prefix-affinity picker). The
    planner prefills only the rest. 0: no reuse assumed."""


class SloSpec(SpecModel):
    """Latency objectives; a request is good when it meets both (goodput, as in DistServe)."""

    ttft_ms: float = Field(default=DEFAULT_TTFT_SLO_MS, gt=0, le=3_600_000)
    """Time to first token, milliseconds."""
    tpot_ms: float = Field(default=DEFAULT_TPOT_SLO_MS, gt=0, le=600_000)
    """Time per output token after the first, milliseconds."""
    quantile: float = Field(default=0.95, gt=0, lt=1)
    """TTFT quantile the autoscaler compares with ttftMs (0.95 = p95)."""
    attainment: float = Field(default=0.99, gt=0, le=1)
    """Target fraction of requests that meet the SLO."""
