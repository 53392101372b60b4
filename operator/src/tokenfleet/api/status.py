"""LLMService status: what the operator planned, what runs, and what the autoscaler decided.

Written only by the operator (through the status subresource) and read back on the next
reconcile, so these models ignore unknown fields instead of rejecting them.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, Literal

from pydantic import ConfigDict, Field

from tokenfleet.api.base import StatusModel
from tokenfleet.api.serving_status import RoleAutoscalingStatus, ServingPlanStatus

Phase = Literal["Pending", "Progressing", "Ready", "Degraded", "Failed"]
ConditionType = Literal[
    "Planned",
    "Ready",
    "Progressing",
    "Degraded",
    "Autoscaling",
    "SLOAttainable",
    "Routing",
    "GpuFallback",
]
ConditionStatus = Literal["True", "False", "Unknown"]


def now_rfc3339() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class Condition(StatusModel):
    """A Kubernetes-style condition (metav1.Condition)."""

    type: ConditionType
    status: ConditionStatus
    reason: str = Field(default="", max_length=1024)
    """CamelCase machine-readable reason (PlanFailed, ReplicasReady, ScaledUp...)."""
    message: str = Field(default="", max_length=32768)
    """One line a person can act on."""
    last_transition_time: str | None = Field(
        default=None, json_schema_extra={"format": "date-time"}
    )
    """When status last changed."""
    observed_generation: int | None = Field(default=None, ge=0)
    """metadata.generation the condition was computed from."""


class Prediction(StatusModel):
    """The capacity model's prediction for one replica at spec.workload."""

    ttft_ms: float | None = None
    tpot_ms: float | None = None
    goodput_requests_per_second: float | None = None


class PlanStatus(StatusModel):
    """Summary of the capacity plan a replica runs with."""

    tensor_parallel_size: int | None = None
    pipeline_parallel_size: int | None = None
    gpus_per_replica: int | None = None
    nodes_per_replica: int | None = None
    engine_version: str | None = None
    kv_cache_tokens: int | None = None
    max_concurrency: float | None = None
    """Requests of maxModelLen tokens the KV cache holds at once."""
    memory_fraction: float | None = None
    max_model_len: int | None = None
    predicted: Prediction | None = None
    engine_args: list[str] = Field(default_factory=list)
    reason: str | None = None
    """Why this TP / PP."""
    warnings: list[str] = Field(default_factory=list)
    serving: ServingPlanStatus | None = None
    """Aggregated or disaggregated, and the roles (spec.serving.mode disaggregated or auto)."""

    @classmethod
    def from_plan(cls, plan: Any, engine_args: list[str] | None = None) -> PlanStatus:
        """From a tokenfleet.capacity Plan (duck-typed so status does not import capacity)."""
        return cls(
            tensor_parallel_size=plan.tensor_parallel_size,
            pipeline_parallel_size=plan.pipeline_parallel_size,
            gpus_per_replica=plan.gpus_per_replica,
            nodes_per_replica=plan.nodes_per_replica,
            engine_version=plan.engine_version,
            kv_cache_tokens=plan.kv_cache_tokens,
            max_concurrency=round(plan.max_concurrency, 2),
            memory_fraction=plan.memory_fraction,
            max_model_len=plan.max_model_len,
            predicted=Prediction(
                ttft_ms=round(plan.predicted.ttft_ms, 1),
                tpot_ms=round(plan.predicted.tpot_ms, 2),
                goodput_requests_per_second=round(plan.predicted.goodput_requests_per_second, 3),
            ),
            engine_args=list(engine_args or []),
            reason=plan.reason,
            warnings=list(plan.warnings),
            serving=(
                ServingPlanStatus.from_decision(plan.serving)
                if getattr(plan, "serving", None) is not None
                else None
            ),
        )


class Signals(StatusModel):
    """The metrics the last autoscaling decision saw (absent: no data, e.g. 0/0 at zero load)."""

    ttft_seconds: float | None = None
    """TTFT at slo.quantile."""
    ttft_attainment: float | None = Field(default=None, ge=0, le=1)
    """Fraction of requests within the TTFT SLO (rounded down to a histogram bucket)."""
    tpot_attainment: float | None = Field(default=None, ge=0, le=1)
    """Fraction of requests (or tokens, engines without a per-request TPOT histogram)
    within the TPOT SLO."""
    goodput: float | None = Field(default=None, ge=0)
    """Requests per second within both SLOs (lower bound of the joint attainment x rate)."""
    request_rate: float | None = Field(default=None, ge=0)
    """Finished requests per second, whole LLMService."""
    running_per_replica: float | None = Field(default=None, ge=0)
    waiting_per_replica: float | None = Field(default=None, ge=0)
    kv_usage: float | None = Field(default=None, ge=0)
    """KV cache usage 0-1, mean over replicas."""
    reporting_replicas: int | None = Field(default=None, ge=0)
    """Replicas whose engine metrics are fresh in Prometheus."""
    picker_queued: float | None = Field(default=None, ge=0)
    """Requests the endpoint picker holds (spec.routing with minReplicas 0)."""
    queue_wait_seconds: float | None = Field(default=None, ge=0)
    """Wait in the engines' queue at slo.quantile (0: below the histogram's first bucket):
    the part of TTFT more replicas shorten."""
    prefix_cache_hit_rate: float | None = Field(default=None, ge=0, le=1)
    """Share of prompt tokens the engines served from their prefix cache over the signal
    window; fed forward into the plan when spec.workload.prefixCacheHitRate is unset."""


class AttainabilityStatus(StatusModel):
    """What the observed traffic lets the SLO reach (autoscale/attainability.py): requests
    whose own prefill breaks ttftMs on an idle replica miss at any replica count, and the
    autoscaler never scales for them."""

    attainable: float | None = Field(default=None, ge=0, le=1)
    """Share of requests an idle replica serves within ttftMs (the SLO's ceiling)."""
    target: float | None = Field(default=None, ge=0, le=1)
    """The attainment the fleet is held to: min(slo.attainment, attainable), less half the
    error budget when the unattainable share eats into it."""
    longest_prompt_tokens: int | None = Field(default=None, ge=0)
    """The longest prompt whose prefill alone fits ttftMs (from the plan's step model)."""
    queue_wait_budget_seconds: float | None = Field(default=None, ge=0)
    """Queueing the slo.quantile request can afford after its own prefill."""
    message: str | None = None


class CapacityStatus(StatusModel):
    """Requests per second one replica serves within the SLO."""

    predicted: float | None = Field(default=None, ge=0)
    """From the capacity model (status.plan.predicted.goodputRequestsPerSecond)."""
    observed: float | None = Field(default=None, ge=0)
    """Learnt online from Prometheus (absent until there is evidence)."""
    predicted_at_mix: float | None = Field(default=None, ge=0)
    """plan()'s goodput at the prompt / output length mix observed over the last 10 minutes
    (the spec's nominal lengths give `predicted`)."""


class AutoscalingStatus(StatusModel):
    """The last decision of the autoscaler (written by it alone)."""

    desired_replicas: int | None = Field(default=None, ge=0)
    last_decision_time: str | None = Field(default=None, json_schema_extra={"format": "date-time"})
    last_scale_time: str | None = Field(default=None, json_schema_extra={"format": "date-time"})
    """When the autoscaler last changed spec.replicas."""
    reason: str | None = None
    """One line: why the last decision (scale up, hold, scale down)."""
    driver: str | None = None
    """The signal that decided (ttft, goodput, feedforward, queue, bounds, hold...)."""
    held: str | None = None
    """Why the last decision held (PrometheusDown, NoData, StaleData, PartialData,
    ReplicasStarting, Cooldown, Stabilizing); absent when it did not."""
    signals: Signals | None = None
    capacity: CapacityStatus | None = None
    cold_start_seconds: float | None = Field(default=None, ge=0)
    """The last cold start observed (a replica ordered with none ready, to the first one
    ready): what a first request waits at the endpoint picker after a scale from zero."""
    attainability: AttainabilityStatus | None = None
    roles: list[RoleAutoscalingStatus] = Field(default_factory=list)
    """Disaggregated serving: each pool's replicas, capacity and signal."""


class AdapterStatus(StatusModel):
    """One LoRA adapter of spec.adapters on the serving engine pods (dynamic loading; written
    by the operator's adapter loop, controller/adapters.py)."""

    name: str
    state: Literal["Loaded", "Loading", "Failed", "Pending"] | None = None
    """Loaded: on every serving pod; Loading: on its way; Failed: a pod refused it (retried
    with backoff); Pending: no pod serves yet."""
    loaded_replicas: int | None = Field(default=None, ge=0)
    """Serving engine pods that hold it."""
    replicas: int | None = Field(default=None, ge=0)
    """Serving engine pods."""
    message: str | None = None
    """Loaded on n of m, or why not (the pod and the engine's answer)."""


class GpuCandidateStatus(StatusModel):
    """One candidate of spec.gpu.type auto, planned at its own best layout."""

    type: str
    price_per_hour: float | None = None
    max_count: int | None = None
    tensor_parallel_size: int | None = None
    gpus_per_replica: int | None = None
    goodput_per_replica: float | None = None
    """Requests/s one replica of this type serves within the SLO."""
    cost_per_million_good_requests: float | None = None
    replicas: int | None = None
    """With workload.targetRequestsPerSecond: the replicas of this type's fleet."""
    total_gpus: int | None = None
    fleet_cost_per_hour: float | None = None
    problem: str | None = None
    """Why the type was left out (does not fit, misses the SLO, beyond its maxCount, not
    offered by the operator's placement provider)."""


class GpuPlacementStatus(StatusModel):
    """Replicas on one GPU type, and what the fallback remembers of it."""

    type: str
    replicas: int = 0
    """Replicas the operator runs on this type now."""
    ready: int | None = None
    unavailable_since: str | None = Field(default=None, json_schema_extra={"format": "date-time"})
    """Since when the type is out of capacity (its pods stayed Unschedulable); absent when
    it is not."""
    held: int | None = None
    """Replicas it keeps while out of capacity (those that were scheduled)."""
    reason: str | None = None


class GpuStatus(StatusModel):
    """spec.gpu.type auto: the type the planner chose, and where the replicas run."""

    chosen: str | None = None
    runner_up: str | None = None
    ranking: str | None = None
    """per-request (GPU cost per good request) or fleet (cheapest fleet at the target rate)."""
    reason: str | None = None
    candidates: list[GpuCandidateStatus] = Field(default_factory=list)
    growth: str | None = None
    """The type the next replica goes to (the chosen one unless it fell back)."""
    placement: list[GpuPlacementStatus] = Field(default_factory=list)


class LLMServiceStatus(StatusModel):
    model_config = ConfigDict(extra="ignore")

    observed_generation: int | None = None
    phase: Phase | None = None
    conditions: list[Condition] = Field(
        default_factory=list,
        json_schema_extra={"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["type"]},
    )
    replicas: int | None = None
    """Replicas that exist (for the scale subresource)."""
    ready_replicas: int | None = None
    selector: str | None = None
    """Label selector of the engine pods, as a string (for the scale subresource / HPA)."""
    plan: PlanStatus | None = None
    gpu: GpuStatus | None = None
    endpoint: str | None = None
    """In-cluster OpenAI base URL (http://NAME.NAMESPACE.svc:PORT/v1)."""
    retained_claims: list[str] = Field(default_factory=list)
    """Model-cache PVCs kept (spec.storage.retain) after spec.storage was removed; delete
    them by hand when the cached weights are no longer wanted."""
    autoscaling: AutoscalingStatus | None = None
    latest_ttft_ms: float | None = None
    """Latest observed TTFT at slo.quantile, milliseconds."""
    adapters: list[AdapterStatus] = Field(default_factory=list)
    """LoRA adapters loaded at runtime: on how many serving pods, or why not."""

    def condition(self, type_: ConditionType) -> Condition | None:
        return next((c for c in self.conditions if c.type == type_), None)

    def set_condition(
        self,
        type_: ConditionType,
        status: ConditionStatus,
        reason: str,
        message: str = "",
        observed_generation: int | None = None,
        now: str | None = None,
    ) -> bool:
        """Add or update a condition; lastTransitionTime moves only when status changes.
        Returns True when anything changed."""
        old = self.condition(type_)
        stamp = old.last_transition_time if old and old.status == status else None
        new = Condition(
            type=type_,
            status=status,
            reason=reason,
            message=message,
            last_transition_time=stamp or now or now_rfc3339(),
            observed_generation=observed_generation,
        )
        if old == new:
            return False
        self.conditions = [c for c in self.conditions if c.type != type_] + [new]
        return True
