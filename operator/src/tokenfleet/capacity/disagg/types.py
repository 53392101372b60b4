"""The records of a serving decision: each role's sized replica and the comparison."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from tokenfleet.capacity.disagg.link import KvLink

if TYPE_CHECKING:
    from tokenfleet.capacity.types import Fleet, Plan

RoleName = Literal["prefill", "decode"]


@dataclass(frozen=True)
class Role:
    """One role's replica: its plan (layout, engine settings, memory) and what one replica
    serves within the role's share of the SLO."""

    name: RoleName
    plan: Plan
    goodput_requests_per_second: float  # per replica, at ROLE_ATTAINMENT within the budget
    ttft_budget_ms: float  # the role's share of the TTFT SLO
    ttft_p95_ms: float  # at its goodput (prefill: queue + prefill; decode: landing + step)
    tpot_ms: float  # median at its goodput (decode only)
    saturation_requests_per_second: float
    # The queue wait the role's TTFT share leaves above a lone request's TTFT: the part of
    # it more replicas shorten (the autoscaler's prefill signal).
    queue_wait_budget_ms: float = 0.0

    @property
    def gpus(self) -> int:
        return self.plan.gpus_per_replica

    @property
    def layout(self) -> str:
        p = self.plan
        return f"TP {p.tensor_parallel_size} x PP {p.pipeline_parallel_size}"

    def as_dict(self) -> dict[str, Any]:
        p = self.plan
        return {
            "role": self.name,
            "tensorParallelSize": p.tensor_parallel_size,
            "pipelineParallelSize": p.pipeline_parallel_size,
            "gpusPerReplica": p.gpus_per_replica,
            "nodesPerReplica": p.nodes_per_replica,
            "gpuMemoryUtilization": p.memory_fraction,
            "maxNumSeqs": p.max_num_seqs,
            "maxNumBatchedTokens": p.max_num_batched_tokens,
            "maxModelLen": p.max_model_len,
            "kvCacheTokens": p.kv_cache_tokens,
            "kvBytesPerToken": p.kv_bytes_per_token,
            "goodputRequestsPerSecond": round(self.goodput_requests_per_second, 3),
            "ttftBudgetMs": round(self.ttft_budget_ms, 1),
            "ttftP95Ms": round(self.ttft_p95_ms, 1),
            "tpotMs": round(self.tpot_ms, 2),
            "saturationRequestsPerSecond": round(self.saturation_requests_per_second, 3),
            "queueWaitBudgetMs": round(self.queue_wait_budget_ms, 1),
        }


@dataclass(frozen=True)
class RoleFleet:
    """xP + yD for a target rate."""

    target_requests_per_second: float
    prefill_replicas: int
    decode_replicas: int
    total_gpus: int
    cost_per_hour: float

    def as_dict(self) -> dict[str, Any]:
        return {
            "targetRequestsPerSecond": self.target_requests_per_second,
            "prefillReplicas": self.prefill_replicas,
            "decodeReplicas": self.decode_replicas,
            "totalGpus": self.total_gpus,
            "costPerHour": round(self.cost_per_hour, 2),
        }


@dataclass(frozen=True)
class Disaggregated:
    """The best prefill / decode pair for the request."""

    prefill: Role
    decode: Role
    link: KvLink
    transfer_ms: float  # one request's KV at the workload's prompt length
    cost_per_million_good_requests: float  # the roles in the ratio their goodputs set
    ttft_p95_ms: float  # prefill + transfer + decode landing, each at its goodput
    fleet: RoleFleet | None = None  # at the request's target rate
    # Prefill replicas per decode replica the autoscaler keeps the pools inside (sizing.py
    # ratio_band); (0, 0): not computed.
    band: tuple[float, float] = (0.0, 0.0)

    @property
    def prefill_per_decode(self) -> float:
        """Prefill replicas per decode replica when both run at their goodput."""
        p = self.prefill.goodput_requests_per_second
        return self.decode.goodput_requests_per_second / p if p > 0 else math.inf

    def label(self) -> str:
        r = self.prefill_per_decode
        return f"{self.prefill.layout} prefill : {self.decode.layout} decode at {r:.2f}:1"

    def as_dict(self) -> dict[str, Any]:
        return {
            "prefill": self.prefill.as_dict(),
            "decode": self.decode.as_dict(),
            "prefillPerDecode": round(self.prefill_per_decode, 3),
            "prefillPerDecodeBand": [round(b, 3) for b in self.band],
            "kvLink": {
                "kind": self.link.kind,
                "gbitPerSecondPerGpu": round(self.link.gbps * 8, 1),
                "efficiency": self.link.efficiency,
                "source": self.link.source,
            },
            "kvTransferMs": round(self.transfer_ms, 2),
            "ttftP95Ms": round(self.ttft_p95_ms, 1),
            "costPerMillionGoodRequests": round(self.cost_per_million_good_requests, 2),
            **({"fleet": self.fleet.as_dict()} if self.fleet else {}),
        }


@dataclass(frozen=True)
class ServingDecision:
    """Aggregated against disaggregated, by GPU cost per good request (or, at a target
    rate, fleet cost per hour), and why."""

    asked: str  # the request's serving mode
    mode: Literal["aggregated", "disaggregated"]
    aggregated_cost: float  # $ per 1M good requests of the best aggregated plan (inf: none)
    aggregated_layout: str
    disaggregated: Disaggregated | None  # None: no pair meets the SLO (see unavailable)
    unavailable: str  # why there is no disaggregated option ("" when there is one)
    interference: float | None  # share of aggregated TPOT its prefill chunks cost
    flip: str  # what would turn the decision around
    why: str
    aggregated_fleet: Fleet | None = None  # the aggregated fleets at the target rate

    @property
    def roles(self) -> tuple[Role, Role] | None:
        d = self.disaggregated
        return (d.prefill, d.decode) if d is not None and self.mode == "disaggregated" else None

    def as_dict(self) -> dict[str, Any]:
        return {
            "asked": self.asked,
            "mode": self.mode,
            "aggregatedCostPerMillionGoodRequests": (
                round(self.aggregated_cost, 2) if math.isfinite(self.aggregated_cost) else None
            ),
            "aggregatedLayout": self.aggregated_layout,
            **({"disaggregated": self.disaggregated.as_dict()} if self.disaggregated else {}),
            **({"unavailable": self.unavailable} if self.unavailable else {}),
            **(
                {"prefillInterference": round(self.interference, 3)}
                if self.interference is not None
                else {}
            ),
            **(
                {"aggregatedFleet": self.aggregated_fleet.as_dict()}
                if self.aggregated_fleet
                else {}
            ),
            "flip": self.flip,
            "why": self.why,
        }
