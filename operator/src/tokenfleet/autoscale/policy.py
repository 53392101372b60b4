"""The SLO autoscaler's decision: PURE `decide(spec, current, signals, history, now)`.

One call per tick (the operator's timer, or `tokenfleet autoscale-sim`). No clock, no I/O:
everything it remembers travels in `History`, which the caller passes back next time.

How a decision is made, in order:
1. Hold (keep the replicas, never scale down) when the data cannot be trusted: Prometheus
   down (signals is None), no replica reporting, stale samples, fewer replicas reporting
   than are ready. Zero load is NOT missing data: a request rate of 0 with every replica
   reporting recommends minReplicas even though TTFT is 0/0 (NaN, so None) then.
2. Learn the per-replica capacity (req/s within the SLO) from what the fleet shows: the SLO
   broke at r req/s per replica -> capacity <= r; it held at r -> capacity >= r. Bounded per
   decision and overall, and only on a settled fleet, so one noisy window cannot swing it.
3. Recommend: the feed-forward estimate rate / (capacity x targetUtilization), raised by
   target tracking on the SLO signal when it is breached (TTFT quantile over ttftMs, SLO
   attainment under target, requests queueing). Breaches act on the replicas that are
   ready, so replicas already starting are not asked for again (no cascade).
4. Panic on a large breach (TTFT over 2x the SLO, attainment far below target): jump to the
   recommendation at once, past replicas already starting, and never scale down for a while.
5. Otherwise scale up fast (the lowest recommendation over the short up window, a step of
   max(maxScaleUpStep, 100%)), but not while earlier new replicas are still starting; scale
   down slowly (the highest recommendation over scaleDownStabilizationSeconds, a cooldown
   between scale-downs, maxScaleDownStep at a time). Then clip to min / max.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from tokenfleet.api.spec import LLMServiceSpec
from tokenfleet.autoscale.types import (
    CapacityEstimate,
    Decision,
    FleetState,
    History,
    HoldReason,
    Recommendation,
    Signals,
)


@dataclass(frozen=True)
class PolicyParams:
    """Every tunable the spec does not expose, with the anchor each default comes from
    (reference/autoscaling.md). One table for all traces and services: not tuned per case."""

    tolerance: float = 0.1
    """HPA v2: no action while the metric is within 10% of its target (AIBrix APA: +-10%)."""
    stale_after_seconds: float = 60.0
    """Newest sample older than this is stale: four HPA sync periods (15 s). llm-d's EPP is
    far stricter (200 ms) because it routes per request; a scaler only needs a fresh minute."""
    panic_ttft_ratio: float = 2.0
    """Knative KPA panics at 200% of target; AIBrix KPA at 2x."""
    panic_attainment_gap: float = 0.10
    """Panic when attainment is this far under slo.attainment (0.99 -> below 0.89): ten
    times the error budget of a 99% SLO, the same 'far out' as Knative's 2x."""
    panic_hold_seconds: float = 60.0
    """Knative leaves panic mode after a stable window (60 s) without a panic condition;
    no scale-down meanwhile."""
    scale_up_rate: float = 2.0
    """At most x2 per decision, or maxScaleUpStep if larger: HPA's 100% per 15 s, AIBrix up x2."""
    scale_down_cooldown_seconds: float = 60.0
    """Between two scale-downs: Knative's 60 s stable window, so the previous step shows in
    the 1-minute rate windows before the next one (Dynamo load mode: one step at a time)."""
    queue_per_replica_threshold: float = 5.0
    """Waiting requests per replica that mean saturation: llm-d WVA / EPP (queue >= 5), the
    KEDA threshold in KServe's LLM docs."""
    learn_settle_seconds: float = 60.0
    """Learn capacity only once the ready count has not changed for a full 1-minute rate
    window (the window the signals are computed over), so old breaches do not count."""
    learn_up_factor: float = 1.25
    """Capacity may rise at most x1.25 per decision (AIBrix-style rate limit, gentler)."""
    learn_down_factor: float = 0.8
    """...and fall at most x0.8 per decision."""
    learn_bounds: tuple[float, float] = (0.25, 4.0)
    """Observed capacity stays within [0.25, 4] x predicted: the model is trusted to 4x."""
    learn_probe_factor: float = 1.05
    """When the SLO holds comfortably at the target utilisation, capacity is raised 5% per
    decision (observed >= r only proves r; the probe finds headroom a pessimistic model
    hides). A later breach takes it back down (x0.8)."""
    learn_comfort_ratio: float = 0.5
    """'Comfortably' = TTFT quantile under half the SLO and attainment at target."""
    learn_min_utilization: float = 0.6
    """Evidence counts only at >= 60% of the believed capacity per replica: an idle fleet
    meets any SLO and says nothing about where it breaks."""


DEFAULTS = PolicyParams()


@dataclass(frozen=True)
class _Assessment:
    """What the signals say about the SLO, in the numbers the rules use."""

    ttft_ratio: float | None  # TTFT quantile / slo.ttftMs
    attainment: float | None  # min of TTFT and TPOT attainment (joint upper bound)
    broke: bool
    comfortable: bool
    panic: bool


def decide(
    spec: LLMServiceSpec,
    current: FleetState,
    signals: Signals | None,
    history: History,
    now: float,
    params: PolicyParams = DEFAULTS,
) -> Decision:
    """The replicas to run from `now` on, why, and the History to pass next time."""
    history = _track_ready(history, current, now)
    hold = _hold_reason(current, signals, now, params)
    if hold is not None or signals is None:
        return _hold(current, replace(history, trusted_since=None), hold or "PrometheusDown")
    if history.trusted_since is None:
        history = replace(history, trusted_since=now)

    scaling = spec.autoscaling
    a = _assess(spec, signals, current, params)
    capacity = _learn(spec, current, signals, history, a, now, params)
    history = replace(history, capacity=capacity)

    details: dict[str, float] = {"capacity": round(capacity.effective, 4)}
    rate = signals.request_rate or 0.0
    # Feed-forward: what the measured load needs at the target utilisation (Dynamo planner).
    per_replica = capacity.effective * scaling.target_utilization
    feedforward = math.ceil(rate / per_replica - 1e-9) if per_replica > 0 else 0
    details["feedforward"] = feedforward
    raw, driver = feedforward, "feedforward" if scaling.metric == "ttft" else "goodput"
    if capacity.predicted <= 0:  # no capacity estimate: only the SLO signals move replicas
        raw, driver = current.desired, scaling.metric

    # Target tracking on the SLO signal, HPA law ceil(N x metric / target), over the replicas
    # that produced the signal (ready), so replicas already starting are not asked for twice.
    ready = max(current.ready, 1)
    for name, value in _breach_recommendations(spec, signals, a, ready, params).items():
        details[name] = value
        if value > raw:
            raw, driver = value, name
    if a.ttft_ratio is not None:
        details["ttftRatio"] = round(a.ttft_ratio, 4)
    if a.attainment is not None:
        details["attainment"] = round(a.attainment, 4)
    details["raw"] = raw

    lo, hi = current.min_replicas, current.max_replicas
    bounded = min(max(raw, lo), hi)
    limited: str | None = "max" if raw > hi else "min" if raw < lo else None

    panic_until = history.panic_until
    if a.panic:
        panic_until = now + params.panic_hold_seconds
    panicking = panic_until is not None and now < panic_until
    window = max(scaling.scale_up_stabilization_seconds, scaling.scale_down_stabilization_seconds)
    recs = tuple(r for r in history.recommendations if r.at > now - window)
    recs += (Recommendation(at=now, replicas=bounded),)
    history = replace(history, recommendations=recs, panic_until=panic_until)

    desired, held, why = _apply_rate_limits(spec, current, history, bounded, panicking, now, params)
    desired = min(max(desired, lo), hi)  # bounds win over every other rule
    if desired > current.desired:
        history = replace(history, last_scale_up_at=now)
    elif desired < current.desired:
        history = replace(history, last_scale_down_at=now)
    if desired == hi and raw > hi:
        driver_note = f"; wants {raw}, limited at maxReplicas {hi}"
    elif limited == "min":
        driver_note = f"; minReplicas {lo}"
    else:
        driver_note = ""
    reason = _reason(signals, a, rate, capacity, driver, raw, desired, current, why) + driver_note
    return Decision(
        previous=current.desired,
        desired=desired,
        reason=reason,
        driver="hold" if held is not None else driver,
        history=history,
        held=held,
        panic=panicking,
        limited="max" if limited == "max" else "min" if limited == "min" else None,
        details=details,
    )


# -- holds ---------------------------------------------------------------------------------------
def _hold_reason(
    current: FleetState, signals: Signals | None, now: float, params: PolicyParams
) -> HoldReason | None:
    if signals is None:
        return "PrometheusDown"
    if signals.reporting_replicas <= 0:
        return "NoData"
    age = signals.newest_sample_age_seconds
    if (age is not None and age > params.stale_after_seconds) or (
        now - signals.at > params.stale_after_seconds
    ):
        return "StaleData"
    if signals.reporting_replicas < current.ready:
        return "PartialData"
    if signals.request_rate is None and signals.ttft_quantile_seconds is None:
        return "NoData"  # series exist but say nothing about load
    return None


def _hold(current: FleetState, history: History, reason: HoldReason) -> Decision:
    """Keep the replicas (only the bounds may move them): acting on untrusted data is how a
    scaler flaps or drops to minReplicas when Prometheus restarts."""
    lo, hi = current.min_replicas, current.max_replicas
    desired = min(max(current.desired, lo), hi)
    messages = {
        "PrometheusDown": "Prometheus did not answer",
        "NoData": "no engine replica reports metrics",
        "StaleData": "the newest engine sample is too old",
        "PartialData": "fewer replicas report metrics than are ready",
    }
    note = f"; bounds move {current.desired} -> {desired}" if desired != current.desired else ""
    return Decision(
        previous=current.desired,
        desired=desired,
        reason=f"{reason}: {messages.get(reason, reason)}; holding {current.desired}{note}",
        driver="bounds" if desired != current.desired else "hold",
        history=history,
        held=reason,
        limited="max" if current.desired > hi else "min" if current.desired < lo else None,
    )


def _track_ready(history: History, current: FleetState, now: float) -> History:
    if history.last_ready != current.ready:
        return replace(history, last_ready=current.ready, ready_changed_at=now)
    return history


# -- what the signals say --------------------------------------------------------------------------
def _assess(
    spec: LLMServiceSpec, s: Signals, current: FleetState, params: PolicyParams
) -> _Assessment:
    slo = spec.slo
    ratio = None
    if s.ttft_quantile_seconds is not None and math.isfinite(s.ttft_quantile_seconds):
        ratio = s.ttft_quantile_seconds / (slo.ttft_ms / 1000.0)
    marginals = [
        v for v in (s.ttft_attainment, s.tpot_attainment) if v is not None and math.isfinite(v)
    ]
    attainment = min(marginals) if marginals else None
    tol = params.tolerance
    broke = (ratio is not None and ratio > 1 + tol) or (
        attainment is not None and attainment < slo.attainment
    )
    comfortable = (
        ratio is not None
        and ratio <= params.learn_comfort_ratio
        and (attainment is None or attainment >= slo.attainment)
    )
    panic = (ratio is not None and ratio >= params.panic_ttft_ratio) or (
        attainment is not None and attainment < slo.attainment - params.panic_attainment_gap
    )
    return _Assessment(ratio, attainment, broke, comfortable, panic)


def _breach_recommendations(
    spec: LLMServiceSpec, s: Signals, a: _Assessment, ready: int, params: PolicyParams
) -> dict[str, int]:
    """Replicas each breached SLO signal asks for (absent when it is within target)."""
    out: dict[str, int] = {}
    tol = params.tolerance
    if a.ttft_ratio is not None and a.ttft_ratio > 1 + tol:
        out["ttft"] = math.ceil(ready * a.ttft_ratio)
    if a.attainment is not None and a.attainment < spec.slo.attainment:
        # Misses scale like load past capacity; at least one more replica.
        ratio = spec.slo.attainment / max(a.attainment, 0.01)
        out["attainment"] = max(ready + 1, math.ceil(ready * ratio))
    waiting, running = s.waiting_per_replica, s.running_per_replica
    if waiting is not None and waiting >= params.queue_per_replica_threshold:
        # The queued requests need the slots the running ones have: (running + waiting) / running.
        busy = max(running or 0.0, 1.0)
        out["queue"] = math.ceil(ready * (busy + waiting) / busy)
    return out


# -- capacity that learns --------------------------------------------------------------------------
def _learn(
    spec: LLMServiceSpec,
    current: FleetState,
    s: Signals,
    history: History,
    a: _Assessment,
    now: float,
    params: PolicyParams,
) -> CapacityEstimate:
    """Correct the per-replica capacity from the rate per ready replica at which the SLO held
    or broke. Bounded per decision and to [0.25, 4] x predicted."""
    cap = history.capacity
    if cap is None or cap.predicted <= 0:
        return cap or CapacityEstimate(predicted=0.0)
    settled = (
        current.starting == 0
        and current.ready > 0
        and history.ready_changed_at is not None
        and now - history.ready_changed_at >= params.learn_settle_seconds
    )
    rate = s.request_rate
    if not settled or rate is None or rate <= 0:
        return cap
    r = rate / current.ready
    eff = cap.effective
    target: float | None = None
    if a.broke:
        if r < eff:  # broke below what we believed: capacity <= r
            target = r
    elif r >= eff * params.learn_min_utilization:
        if r > eff:  # held above what we believed: capacity >= r
            target = r
        elif a.comfortable and r >= eff * spec.autoscaling.target_utilization * 0.9:
            target = eff * params.learn_probe_factor
    if target is None:
        return cap
    lo_b, hi_b = params.learn_bounds
    step = min(max(target, eff * params.learn_down_factor), eff * params.learn_up_factor)
    observed = min(max(step, cap.predicted * lo_b), cap.predicted * hi_b)
    return replace(cap, observed=observed)


# -- windows, steps, cooldowns ---------------------------------------------------------------------
def _apply_rate_limits(
    spec: LLMServiceSpec,
    current: FleetState,
    history: History,
    bounded: int,
    panicking: bool,
    now: float,
    params: PolicyParams,
) -> tuple[int, HoldReason | None, str]:
    scaling = spec.autoscaling
    desired = current.desired
    up_recs = [
        r.replicas
        for r in history.recommendations
        if r.at > now - scaling.scale_up_stabilization_seconds or r.at == now
    ]
    down_window = scaling.scale_down_stabilization_seconds
    down_recs = [
        r.replicas for r in history.recommendations if r.at > now - down_window or r.at == now
    ]
    if history.trusted_since is None or now - history.trusted_since < down_window:
        # The window is not yet covered by decisions on trusted data (first decisions after a
        # start or a hold): the unseen part counts as "keep what runs".
        down_recs.append(desired)
    if panicking and bounded > desired:
        # Knative panic: straight to the recommendation, past what is already starting
        # (the recommendation counts ready replicas only, so starting ones are not re-asked).
        return bounded, None, "panic: jump to the recommendation"
    if bounded > desired:
        if current.starting > 0:
            return desired, "ReplicasStarting", f"{current.starting} replica(s) still starting"
        target = min(up_recs)  # the signal must ask for more over the whole short window
        if target <= desired:
            return desired, None, "scale-up waits for the up stabilization window"
        step = max(scaling.max_scale_up_step, math.ceil(desired * (params.scale_up_rate - 1)))
        return min(target, desired + step), None, "scale up"
    if bounded < desired:
        if panicking:
            return desired, None, "no scale-down while panicking"
        target = max(down_recs)  # the highest recommendation of the down window
        if target >= desired:
            return desired, "Stabilizing", "scale-down waits for the stabilization window"
        last = history.last_scale_down_at
        if last is not None and now - last < params.scale_down_cooldown_seconds:
            return desired, "Cooldown", "too soon after the last scale-down"
        return max(target, desired - scaling.max_scale_down_step), None, "scale down"
    return desired, None, "at the recommendation"


def _reason(
    s: Signals,
    a: _Assessment,
    rate: float,
    cap: CapacityEstimate,
    driver: str,
    raw: int,
    desired: int,
    current: FleetState,
    why: str,
) -> str:
    seen = [f"{rate:.3g} req/s on {current.ready} ready"]
    if a.ttft_ratio is not None and s.ttft_quantile_seconds is not None:
        seen.append(f"TTFT {s.ttft_quantile_seconds * 1000:.0f} ms ({a.ttft_ratio:.2f}x SLO)")
    if a.attainment is not None:
        seen.append(f"attainment {a.attainment:.3f}")
    seen.append(f"capacity {cap.effective:.3g} req/s/replica")
    move = f"{current.desired} -> {desired}" if desired != current.desired else f"{desired} kept"
    return f"{', '.join(seen)}; {driver} wants {raw}; {move} ({why})"
