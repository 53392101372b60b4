"""The autoscaler's records: what Prometheus showed, what the fleet is, what was decided.

Pure data shared by the policy (pure), the signals / Prometheus client (I/O), the operator's
timer and `tokenfleet autoscale-sim`. Times are seconds on one clock chosen by the caller
(wall-clock Unix seconds in the operator, virtual seconds in the offline simulator): the
policy never reads a clock itself.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from tokenfleet.autoscale.bursts import BurstMemory

# Why a decision held instead of acting (None when it acted or had nothing to do).
HoldReason = Literal[
    "PrometheusDown",  # the query failed: unreachable, timeout, 5xx
    "NoData",  # no series for this LLMService (not scraped yet, wrong labels)
    "StaleData",  # the newest sample is older than the staleness bound
    "PartialData",  # fewer replicas report than are ready
    "ReplicasStarting",  # earlier new replicas are not ready yet: no new scale-up
    "Cooldown",  # too soon after the last scale event in that direction
    "Stabilizing",  # a scale-down waits for the stabilization window
]


@dataclass(frozen=True)
class Signals:
    """One observation of one LLMService, evaluated by Prometheus at `at`.

    None means "no value" (the query returned nothing, or 0/0 at zero load): the policy must
    tell that apart from zero. Rates are per second over the query window, summed over the
    LLMService's replicas unless the name says per replica.
    """

    at: float
    """Evaluation time of the queries."""
    reporting_replicas: int
    """Replicas with a fresh sample (count of scraped engine pods that are up)."""
    request_rate: float | None = None
    """Finished requests per second, whole LLMService."""
    ttft_quantile_seconds: float | None = None
    """TTFT at slo.quantile (histogram_quantile over the window)."""
    ttft_attainment: float | None = None
    """Fraction of requests with TTFT <= slo.ttftMs (safe rounding to the bucket below)."""
    tpot_attainment: float | None = None
    """Fraction of requests with inter-token latency <= slo.tpotMs (same rounding)."""
    goodput: float | None = None
    """Requests per second that met the SLO: lower bound of the joint bound times the rate."""
    running_per_replica: float | None = None
    """Mean requests running per reporting replica."""
    waiting_per_replica: float | None = None
    """Mean requests waiting per reporting replica."""
    kv_usage: float | None = None
    """Mean KV-cache usage 0-1 over reporting replicas."""
    newest_sample_age_seconds: float | None = None
    """Age of the newest engine sample at `at` (staleness); None: unknown."""
    picker_queued: float | None = None
    """Requests the endpoint picker's flow control holds (spec.routing with minReplicas 0;
    llm_d_epp_flow_control_queue_size summed over the pool); None: no picker reports."""
    queue_wait_quantile_seconds: float | None = None
    """Wait in the engines' queue at slo.quantile (vllm:request_queue_time_seconds,
    sglang:queue_time_seconds): the part of TTFT more replicas shorten."""
    prefix_cache_hit_rate: float | None = None
    """Share of prompt tokens the engines served from their prefix cache over the window
    (signals.prefix_hit_rate_query); None: no prompt, or the engine exports none."""
    arrival_dispersion: float | None = None
    """Index of dispersion (variance / mean, autoscale/dispersion.py) of first-token counts
    per dispersion.BIN_SECONDS over dispersion.WINDOW_SECONDS; None: too few arrivals."""
    spec_accept_length: float | None = None
    """Speculative decoding's tokens per verify step over the window, from the engines' own
    acceptance metrics (signals.acceptance_query); None: no speculation or no drafts."""


@dataclass(frozen=True)
class FleetState:
    """What runs now, as the LLMService's status and spec say."""

    desired: int
    """spec.replicas: what the workload is asked to run."""
    ready: int
    """status.readyReplicas: replicas that serve."""
    min_replicas: int
    max_replicas: int

    @property
    def starting(self) -> int:
        """Replicas asked for but not ready yet (cold start is minutes for GPU pods)."""
        return max(0, self.desired - self.ready)


@dataclass(frozen=True)
class CapacityEstimate:
    """Requests per second one replica serves within the SLO.

    `predicted` is the capacity model's plan() goodput; `observed` the online correction
    learnt from Prometheus (None until there is evidence). The policy uses `effective`.
    """

    predicted: float
    observed: float | None = None

    @property
    def effective(self) -> float:
        return self.observed if self.observed is not None else self.predicted


@dataclass(frozen=True)
class Recommendation:
    """One past raw recommendation, kept for the stabilization windows."""

    at: float
    replicas: int


@dataclass(frozen=True)
class History:
    """What the policy remembers between decisions. Returned (updated) in every Decision;
    the caller stores it (the operator in memory per LLMService, rebuilt from status after a
    restart) and passes it back next time."""

    recommendations: tuple[Recommendation, ...] = ()
    last_scale_up_at: float | None = None
    last_scale_down_at: float | None = None
    panic_until: float | None = None
    capacity: CapacityEstimate | None = None
    last_ready: int | None = None
    """current.ready at the previous decision (to see when the fleet changed)."""
    ready_changed_at: float | None = None
    """When the ready count last changed: capacity is learnt only on a settled fleet."""
    ready_samples: tuple[tuple[float, int], ...] = ()
    """(at, ready) of the decisions inside the signals' window: a windowed signal is
    charged to the fewest (a breach) or the most (a success) replicas that served it."""
    ready_grew_at: float | None = None
    """When more replicas last became ready: windowed SLO signals lag that change."""
    last_in_flight: tuple[float, float] | None = None
    """(at, requests running + waiting over the fleet) at the previous decision: the
    change tells arrivals from finishes when the fleet is saturated."""
    queued: tuple[tuple[float, float], ...] = ()
    """(at, requests waiting in the engines' queues and at the picker) of the decisions
    within the signals' window: the arrivals over it are the finish rate plus the growth
    since the oldest (policy._demand)."""
    rates: tuple[tuple[float, float], ...] = ()
    """(at, arrivals per second) of recent decisions: the load's trend for the forecast."""
    trusted_since: float | None = None
    """Start of the current run of decisions on trusted data (None after a hold or at
    first): a scale-down needs a whole stabilization window of them."""
    last_traffic_at: float | None = None
    """Last decision that saw a request (finished, in flight or queued at the picker): the
    idle clock of scale to zero (autoscale/zero.py). None (a restart): the clock restarts."""
    cold_since: float | None = None
    """When the fleet was last asked for a replica with none ready (from zero, or at first)."""
    cold_start_seconds: float | None = None
    """The last cold start observed: from cold_since to the first replica ready. What a
    first request waits at the picker after a scale from zero."""
    bursts: BurstMemory = field(default_factory=BurstMemory)
    """Late scale-ups and absorbed bursts: the standing floor of autoscale/bursts.py."""


@dataclass(frozen=True)
class Decision:
    previous: int
    """The replicas before this decision (current.desired)."""
    desired: int
    """Replicas to run from now on (== previous when holding)."""
    reason: str
    """One line a person can act on: what was seen and why this number."""
    driver: str
    """The signal that decided: "ttft", "goodput", "feedforward", "queue", "bounds", "hold"..."""
    history: History
    held: HoldReason | None = None
    panic: bool = False
    limited: Literal["max", "min"] | None = None
    """The raw recommendation was clipped to maxReplicas / minReplicas."""
    details: dict[str, float] = field(default_factory=dict)
    """Numbers behind the decision (raw recommendation, feed-forward estimate...)."""

    @property
    def direction(self) -> Literal["up", "down", "none"]:
        if self.desired == self.previous:
            return "none"
        return "up" if self.desired > self.previous else "down"
