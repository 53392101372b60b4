"""status.plan.serving: what the planner decided about disaggregated serving, and why."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from tokenfleet.api.base import StatusModel


class RolePlanStatus(StatusModel):
    """One role of disaggregated serving as planned."""

    role: str
    tensor_parallel_size: int | None = None
    pipeline_parallel_size: int | None = None
    gpus_per_replica: int | None = None
    goodput_requests_per_second: float | None = None
    """Requests/s one replica serves within its share of the SLO."""
    ttft_budget_ms: float | None = None
    """The role's share of the TTFT SLO."""
    queue_wait_budget_ms: float | None = None
    """The queue wait that share leaves above a lone request's TTFT (the part more replicas
    shorten: the prefill pool's scaling signal)."""


class ServingPlanStatus(StatusModel):
    """The aggregated / disaggregated decision (spec.serving.mode disaggregated or auto)."""

    mode: str
    """The kind of serving the plan runs: aggregated or disaggregated."""
    why: str | None = None
    """Which kind won, by how much, and what would turn it around."""
    prefill_per_decode: float | None = None
    """Prefill replicas per decode replica when both run at their goodput."""
    prefill_per_decode_band: list[float] = Field(default_factory=list)
    """[low, high]: the ratio at prompts half and twice as long as planned; the autoscaler
    keeps the two pools inside it."""
    kv_transfer_ms: float | None = None
    roles: list[RolePlanStatus] = Field(default_factory=list)

    @classmethod
    def from_decision(cls, decision: Any) -> ServingPlanStatus:
        """From a capacity ServingDecision (duck-typed: status does not import capacity)."""
        d = decision.disaggregated if decision.mode == "disaggregated" else None
        roles = []
        if d is not None:
            for r in (d.prefill, d.decode):
                roles.append(
                    RolePlanStatus(
                        role=r.name,
                        tensor_parallel_size=r.plan.tensor_parallel_size,
                        pipeline_parallel_size=r.plan.pipeline_parallel_size,
                        gpus_per_replica=r.plan.gpus_per_replica,
                        goodput_requests_per_second=round(r.goodput_requests_per_second, 3),
                        ttft_budget_ms=round(r.ttft_budget_ms, 1),
                        queue_wait_budget_ms=round(r.queue_wait_budget_ms, 1),
                    )
                )
        return cls(
            mode=decision.mode,
            why=decision.why,
            prefill_per_decode=round(d.prefill_per_decode, 3) if d is not None else None,
            prefill_per_decode_band=[round(b, 3) for b in d.band] if d is not None else [],
            kv_transfer_ms=round(d.transfer_ms, 2) if d is not None else None,
            roles=roles,
        )


class RoleAutoscalingStatus(StatusModel):
    """One pool of disaggregated serving as the autoscaler last saw and set it."""

    role: str
    replicas: int | None = Field(default=None, ge=0)
    """The replicas it set (decode: spec.replicas; prefill: spec.serving.prefillReplicas)."""
    goodput_per_replica: float | None = Field(default=None, ge=0)
    """The plan's capacity of one replica within its share of the SLO."""
    signal: str | None = None
    """What decided this pool: decode on its TPOT attainment and KV use, prefill on its
    queue wait against the wait its TTFT share leaves."""
