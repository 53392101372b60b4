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


class ServingPlanStatus(StatusModel):
    """The aggregated / disaggregated decision (spec.serving.mode disaggregated or auto)."""

    mode: str
    """The kind of serving the plan runs: aggregated or disaggregated."""
    why: str | None = None
    """Which kind won, by how much, and what would turn it around."""
    prefill_per_decode: float | None = None
    """Prefill replicas per decode replica when both run at their goodput."""
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
                    )
                )
        return cls(
            mode=decision.mode,
            why=decision.why,
            prefill_per_decode=round(d.prefill_per_decode, 3) if d is not None else None,
            kv_transfer_ms=round(d.transfer_ms, 2) if d is not None else None,
            roles=roles,
        )
