"""The SLO autoscaler's decision: PURE `decide(spec, current, signals, history, now)`.

One call per tick (the operator's timer, or `tokenfleet autoscale-sim`). No clock, no I/O:
everything it remembers travels in `History`, which the caller passes back next time.

How a decision is made, in order:
1. Hold (keep the replicas, never scale down) when the data cannot be trusted: Prometheus
   down (signals is None), no replica reporting, stale samples, fewer replicas reporting
   than are ready. Zero load is NOT missing data: a request rate of 0 with every replica
   reporting recommends minReplicas even though TTFT is 0/0 (NaN, so None) then.
2. Demand: finished req/s plus the change of requests in flight (a saturated fleet hides
   the load that queues), forecast along its trend to when replicas ordered now will serve.
3. Learn the per-replica capacity (req/s within the SLO) from what the fleet shows: the SLO
   broke at r req/s per replica -> capacity < r; it held at r -> capacity >= r; it held
   only just, well below the operating point -> nudged down; bounded per decision and
   overall, charged to the fewest / most replicas ready in the signals' window.
4. Recommend: the feed-forward estimate demand / (capacity x targetUtilization), raised by
   target tracking on the SLO signal when it is breached (TTFT quantile over ttftMs, SLO
   attainment under target, requests queueing). Breaches act on the replicas that are
   ready, so replicas already starting are not asked for again (no cascade).
5. Panic on a large breach (TTFT over 2x the SLO, attainment far below target): jump to the
   recommendation at once, past replicas already starting, and never scale down for a while.
6. Otherwise scale up fast (the lowest recommendation over the short up window, a step of
   max(maxScaleUpStep, 100%)); while replicas start, only for load they could not serve
   either. Scale down slowly (the highest recommendation over
   scaleDownStabilizationSeconds, never while the SLO is missed, a cooldown between
   scale-downs, max(maxScaleDownStep, half) at a time). Then clip to min / max.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from tokenfleet.api.spec import LLMServiceSpec
from tokenfleet.autoscale import bursts, dispersion, zero
from tokenfleet.autoscale.attainability import Ceiling
from tokenfleet.autoscale.fixable import fixable_view
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
    attainment_breach_budgets: float = 2.0
    """Attainment is a breach when the misses exceed twice the error budget (0.99 -> under
    0.98): a 1-minute window of a thousand requests moves by a few tenths of a percent on
    its own, and misses from prompts no replica count can fix (a long prompt's prefill)
    must not read as missing capacity. The HPA's 10% tolerance, applied to the budget."""
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
    scale_down_rate: float = 2.0
    """At most /2 per scale-down, or maxScaleDownStep if larger: AIBrix down /2, Knative's
    max scale-down rate 2. The stabilization window, not the step, is what makes it slow."""
    scale_down_cooldown_seconds: float = 60.0
    """Between two scale-downs: Knative's 60 s stable window, so the previous step shows in
    the 1-minute rate windows before the next one (Dynamo load mode: one step at a time)."""
    queue_per_replica_threshold: float = 5.0
    """Waiting requests per replica that mean saturation: llm-d WVA / EPP (queue >= 5), the
    KEDA threshold in KServe's LLM docs."""
    trend_window_seconds: float = 180.0
    """The load's trend is fitted over 3 minutes: Dynamo's planner interval (180 s)."""
    forecast_seconds: float = 120.0
    """...and extrapolated (upward only) to when replicas ordered now will serve: a cold
    start (1-5 minutes for 7-70B models with the image on the node, reference/
    autoscaling.md; 2 minutes in Dynamo's replay study, where reactive scaling collapsed).
    The rate's lag is already covered: demand adds the change of requests in flight.
    180 s (cold start + rate lag + up window) was needed only when the diurnal day was
    compressed into 30 minutes; on a 2-hour day it over-provisioned the ramps (1.23x vs
    1.15x the oracle at the same attainment)."""
    trend_noise_z: float = 2.0
    """A trend counts only beyond the rate's own counting noise: a request rate measured
    over a window of W seconds is a Poisson count / W, variance rate / W (W =
    learn_settle_seconds, the signals' rate window); the difference of the trend window's
    two halves has the sum of their variances. The increase is shrunk by this many standard
    deviations (a lower confidence bound, 2 = about 95%), so noise at low load is not
    extrapolated a cold start ahead into a replica nobody needs (seen in the demo at a
    steady 0.24 req/s on one replica: windows reading 0.12 then 0.28 req/s)."""
    learn_settle_seconds: float = 60.0
    """The signals' window (rate(...[1m])): windowed TTFT / attainment describe the fleet of
    the last minute, so learning charges them to its fewest / most ready replicas, and SLO
    breaches are not acted on for a minute after replicas became ready."""
    learn_up_factor: float = 1.25
    """Capacity may rise at most x1.25 per decision (AIBrix-style rate limit, gentler)."""
    learn_down_factor: float = 0.8
    """...and fall at most x0.8 per decision."""
    learn_bounds: tuple[float, float] = (0.25, 4.0)
    """Observed capacity stays within [0.25, 4] x predicted: the model is trusted to 4x."""
    learn_probe_factor: float = 1.02
    """When the SLO holds comfortably at the target utilisation, capacity is raised 2% per
    decision (observed >= r only proves r, and a fleet run at targetUtilization never
    shows more; the probe finds the headroom a pessimistic model or a past breach hides).
    A breach takes it back down to the rate that broke."""
    learn_break_margin: float = 0.9
    """Where the SLO broke, capacity is below that load: 10% below, the HPA's tolerance."""
    learn_nudge_down: float = 0.03
    """Attainment under target but above the breach floor lowers capacity 3% per decision
    per error budget missed (0.985 at a 0.99 target: -4.5%): weaker evidence, smaller step.
    The same per budget used when the SLO held only just (more than half the budget used)
    below 90% of the operating point: the fleet is nearer its edge than believed."""
    learn_comfort_budget: float = 0.5
    """'Comfortably' = at most half the error budget used (0.99 -> attainment >= 0.995)
    with the TTFT quantile within the SLO."""
    learn_probe_utilization: float = 0.9
    """The probe needs the fleet to have run at >= 90% of its operating point
    (targetUtilization x capacity): an idle fleet meets any SLO and proves nothing."""
    learn_recovering_ratio: float = 0.9
    """Requests in flight falling by more than 10% of the finish rate = draining a backlog."""


DEFAULTS = PolicyParams()


@dataclass(frozen=True)
class _Assessment:
    """What the signals say about the SLO, in the numbers the rules use."""

    ttft_ratio: float | None  # TTFT quantile / slo.ttftMs
    attainment: float | None  # min of TTFT and TPOT attainment (joint upper bound)
    floor: float  # attainment under this is a breach
    noise: float  # how far a window's attainment strays by chance (its request count)
    broke: bool
    comfortable: bool
    panic: bool
    queue_wait: tuple[float, float] | None = None
    """(wait at slo.quantile, its budget) in seconds when ttft_ratio is the queue wait over
    its budget (the fixable view), not the TTFT quantile over the SLO."""


def decide(
    spec: LLMServiceSpec,
    current: FleetState,
    signals: Signals | None,
    history: History,
    now: float,
    params: PolicyParams = DEFAULTS,
    ceiling: Ceiling | None = None,
    mix_capacity: float | None = None,
) -> Decision:
    """The replicas to run from `now` on, why, and the History to pass next time.

    `mix_capacity` (autoscale/mix.py): plan()'s goodput at the observed attainable mix.
    It replaces the predicted capacity (the spec's nominal lengths) as the feed-forward;
    what learning found is kept as its ratio to the prediction.

    `ceiling` (attainability.py): what the traffic lets the SLO reach. With it, the SLO
    signals are read for what replicas can fix (autoscale/fixable.py): attainment among
    attainable requests against the ceiling's target, queue wait against the budget left
    after the mix's own prefill; misses no replica fixes never scale the fleet.

    With minReplicas 0 the rules of autoscale/zero.py wrap the policy: they decide at zero,
    and may take the last replica away after the idle window; the policy never goes to 0."""
    history = _feed_forward(history, mix_capacity)
    history = zero.track(history, current, signals, now)
    at_zero = zero.from_zero(spec, current, signals, history, now)
    if at_zero is not None:
        return at_zero
    decision = _decide(spec, zero.policy_view(current), signals, history, now, params, ceiling)
    return zero.to_zero(spec, current, signals, decision, now)


def _decide(
    spec: LLMServiceSpec,
    current: FleetState,
    signals: Signals | None,
    history: History,
    now: float,
    params: PolicyParams,
    ceiling: Ceiling | None,
) -> Decision:
    """The module docstring's steps, one named phase each."""
    history = _track_ready(history, current, now, params)
    hold = _hold_reason(current, signals, now, params)
    if hold is not None or signals is None:
        held = replace(_note_ready(history, current, now), trusted_since=None)
        if hold == "PartialData" and signals is not None:
            up = _scale_up_on_partial(spec, current, signals, history, held, now, params, ceiling)
            if up is not None:
                return up
        return _hold(current, held, hold or "PrometheusDown")
    if history.trusted_since is None:
        history = replace(history, trusted_since=now)
    return _decide_trusted(spec, current, signals, history, now, params, ceiling)


def _decide_trusted(
    spec: LLMServiceSpec,
    current: FleetState,
    signals: Signals,
    history: History,
    now: float,
    params: PolicyParams,
    ceiling: Ceiling | None,
) -> Decision:
    """Steps 2-6 on signals step 1 passed."""
    spec, signals, a = _read_slo(spec, current, signals, history, params, ceiling)
    t = _Tick(spec, current, signals, now, params)
    sizing, history = _size(t, history, a)
    sizing = _track_slo(t, history, a, sizing)
    sizing, floor = _burst_floor(t, history, sizing)
    outcome, history = _limit(t, history, a, sizing)
    history = _remember(t, history, a, sizing, floor, outcome)
    return _decision(t, history, a, sizing, floor, outcome)


@dataclass(frozen=True)
class _Tick:
    """What the phases of one trusted decision read and none of them changes: the spec and
    the signals as the SLO reading left them (the fixable view), the fleet, the time and
    the parameters."""

    spec: LLMServiceSpec
    current: FleetState
    signals: Signals
    now: float
    params: PolicyParams


@dataclass(frozen=True)
class _Sizing:
    """What the load needs, and the signal that asks for the most replicas so far."""

    rate: float  # finished requests per second
    load: float  # arrivals per second now
    backlog: float  # requests waiting: in the engines' queues and at the picker
    demand: float  # arrivals per second when replicas ordered now serve (the forecast)
    capacity: CapacityEstimate
    per_replica: float  # capacity x targetUtilization
    raw: int  # the recommendation before bounds and windows
    driver: str
    details: dict[str, float]  # Decision.details, filled phase by phase


@dataclass(frozen=True)
class _Floor:
    """The standing floor of recurring bursts, and the windows it was judged over."""

    standing: bursts.Floor | None
    span: float
    lag: float


@dataclass(frozen=True)
class _Outcome:
    desired: int
    held: HoldReason | None
    why: str
    limited: str | None
    panicking: bool


def _read_slo(
    spec: LLMServiceSpec,
    current: FleetState,
    signals: Signals,
    history: History,
    params: PolicyParams,
    ceiling: Ceiling | None,
) -> tuple[LLMServiceSpec, Signals, _Assessment]:
    """Step 1 passed: the SLO signals, read for what replicas can fix (autoscale/fixable.py)."""
    if ceiling is not None and signals.request_rate is not None:
        # The window's load per replica: its fewest ready replicas carried it (as _learn).
        fewest = min([n for _, n in history.ready_samples] + [current.ready])
        ceiling = ceiling.at_load(signals.request_rate / max(fewest, 1))
    wait = signals.queue_wait_quantile_seconds
    spec, signals = fixable_view(spec, signals, ceiling)
    unattainable = ceiling.miss_variance() if ceiling is not None else 0.0
    a = _assess(spec, signals, current, params, unattainable)
    budget = ceiling.wait_budget_seconds if ceiling is not None else None
    if a.ttft_ratio is not None and wait is not None and budget is not None:
        a = replace(a, queue_wait=(wait, budget))
    return spec, signals, a


def _size(t: _Tick, history: History, a: _Assessment) -> tuple[_Sizing, History]:
    """Steps 2-4: demand and its trend, the capacity learnt, the feed-forward."""
    spec, current, signals, now, params = t.spec, t.current, t.signals, t.now, t.params
    scaling = spec.autoscaling
    rate = signals.request_rate or 0.0
    demand, arrivals, history = _demand(signals, history, now, params)
    headroom = _Headroom.of(spec, signals)
    capacity = _learn(t, history, a, demand, headroom)
    history = replace(_note_ready(history, current, now), capacity=capacity)
    details: dict[str, float] = {"capacity": round(capacity.effective, 4)}
    details["demand"] = round(demand, 4)
    if headroom.excess_idc > 0:
        details["excessDispersion"] = round(headroom.excess_idc, 4)
    load = demand
    # The trend of arrivals, not of finishes: a saturated fleet's finish rate stays flat
    # while the load climbs, which is when the forecast is needed most.
    slope, history = _trend(arrivals, history, now, params)
    if slope > 0:
        # Replicas ordered now serve only after a cold start: size for the load then
        # (Dynamo's planner forecasts the next interval; a linear trend is its simplest).
        demand += slope * params.forecast_seconds
        details["forecast"] = round(demand, 4)
    # Feed-forward: what the load needs at the target utilisation (Dynamo planner), its
    # bursts' headroom included (square-root staffing, autoscale/dispersion.py).
    sized = headroom.load(demand)
    if sized > demand:
        details["burstLoad"] = round(sized, 4)
    per_replica = capacity.effective * scaling.target_utilization
    feedforward = math.ceil(sized / per_replica - 1e-9) if per_replica > 0 else 0
    details["feedforward"] = feedforward
    raw, driver = feedforward, "feedforward" if scaling.metric == "ttft" else "goodput"
    if capacity.predicted <= 0:  # no capacity estimate: only the SLO signals move replicas
        raw, driver = current.desired, scaling.metric
    backlog = (signals.waiting_per_replica or 0.0) * signals.reporting_replicas
    backlog += signals.picker_queued or 0.0
    sizing = _Sizing(rate, load, backlog, demand, capacity, per_replica, raw, driver, details)
    return sizing, history


def _track_slo(t: _Tick, history: History, a: _Assessment, sizing: _Sizing) -> _Sizing:
    """Step 4's target tracking on the SLO signal, HPA law ceil(N x metric / target), over
    the replicas that produced the signal (ready), so replicas already starting are not
    asked for twice."""
    ready = max(t.current.ready, 1)
    breaches = _breach_recommendations(t, a, ready)
    if not _window_covers_fleet(history, t.now, t.params):
        # TTFT and attainment are windowed: right after replicas became ready they still
        # describe the smaller fleet (a backlog it built). Acting on them would order the
        # same replicas twice; the instantaneous queue and the feed-forward still act.
        breaches = {k: v for k, v in breaches.items() if k == "queue"}
    raw, driver = sizing.raw, sizing.driver
    for name, value in breaches.items():
        sizing.details[name] = value
        if value > raw:
            raw, driver = value, name
    return replace(sizing, raw=raw, driver=driver)


def _burst_floor(t: _Tick, history: History, sizing: _Sizing) -> tuple[_Sizing, _Floor]:
    """Recurring bursts shorter than a cold start: replicas ordered for one arrive after
    it, so keep up to the floor that absorbs them instead of chasing past it
    (autoscale/bursts.py), also a rise above the bursts seen until it has outlasted a cold
    start. The floor only keeps what runs: ordering replicas is still the other signals'
    call, under their windows."""
    spec, now, params = t.spec, t.now, t.params
    cold_start = bursts.cold_start(history.bursts, params.forecast_seconds)
    span = spec.autoscaling.scale_down_stabilization_seconds + cold_start
    budget = 1 - spec.slo.attainment  # the fixable view's: what replicas can spend
    standing = bursts.floor(history.bursts, sizing.capacity.effective, now, span, budget)
    lag = params.learn_settle_seconds
    young = bursts.young(history.bursts, now, params.forecast_seconds, lag)
    if standing is not None and (sizing.load <= standing.peak or young):
        sizing.details["burstFloor"] = standing.replicas
        raw = min(standing.replicas, max(sizing.raw, t.current.desired))
        # Not chasing is no reason to cut: replicas the load keeps busy even at full
        # utilisation stay (a floor sized at a quieter time must not take away the
        # replicas of a load that has since outgrown it).
        raw = max(raw, min(t.current.desired, _at_full(sizing)))
        sizing = replace(sizing, raw=raw, driver="bursts")
    return sizing, _Floor(standing, span, lag)


def _at_full(sizing: _Sizing) -> int:
    """Replicas the demand keeps busy at full utilisation of the capacity learnt."""
    effective = sizing.capacity.effective
    return math.ceil(sizing.demand / effective - 1e-9) if effective > 0 else 0


def _limit(t: _Tick, history: History, a: _Assessment, sizing: _Sizing) -> tuple[_Outcome, History]:
    """Steps 5-6: bounds, panic, and the windows, steps and cooldowns."""
    spec, current, now, params = t.spec, t.current, t.now, t.params
    scaling = spec.autoscaling
    raw, details = sizing.raw, sizing.details
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

    # What the load needs at full utilisation: while replicas start, only a load that even
    # all of them could not serve orders more (the SLO signals lag the starting replicas).
    effective = sizing.capacity.effective
    at_full = _at_full(sizing)
    outgrown = at_full > current.desired
    # ...and, while the SLO is broken, must also drain the queue it built within a cold
    # start: a fleet at exactly full utilisation never does, and the SLO would stay broken
    # until a replica ordered once these are ready is ready in turn. Arrivals and the queue
    # are counted, not the breach, so no replica is ordered twice.
    draining = at_full
    if a.broke and sizing.backlog > 0 and effective > 0:
        drain = sizing.backlog / params.forecast_seconds
        draining = math.ceil((sizing.demand + drain) / effective - 1e-9)
    # Dynamo's load planner removes a replica only if the rest stay well inside the SLA:
    # no scale-down while the SLO is not met now, whatever the load says.
    slo_met = not (
        (a.ttft_ratio is not None and a.ttft_ratio > 1)
        or (a.attainment is not None and a.attainment < spec.slo.attainment)
    )
    desired, held, why = _apply_rate_limits(
        t, history, bounded, panicking, outgrown, draining, slo_met
    )
    desired = min(max(desired, lo), hi)  # bounds win over every other rule
    return _Outcome(desired, held, why, limited, panicking), history


def _remember(
    t: _Tick, history: History, a: _Assessment, sizing: _Sizing, floor: _Floor, outcome: _Outcome
) -> History:
    """What the next decisions need of this one: the bursts seen, the last scale times."""
    current, now, params = t.current, t.now, t.params
    memory = bursts.observe(
        history.bursts,
        now=now,
        ready=current.ready,
        demand=sizing.load,
        per_replica=sizing.per_replica,
        slo_met=not a.broke,
        missed=1 - a.attainment if a.attainment is not None else 0.0,
        scaled_up=outcome.desired > current.desired,
        span=floor.span,
        lag=floor.lag,
        default_cold_start=params.forecast_seconds,
        noise_z=params.trend_noise_z,
    )
    history = replace(history, bursts=memory)
    if outcome.desired > current.desired:
        history = replace(history, last_scale_up_at=now)
    elif outcome.desired < current.desired:
        history = replace(history, last_scale_down_at=now)
    return history


def _decision(
    t: _Tick, history: History, a: _Assessment, sizing: _Sizing, floor: _Floor, outcome: _Outcome
) -> Decision:
    """The decision and its reason, in words a person reads in status."""
    current, signals = t.current, t.signals
    raw, driver, desired = sizing.raw, sizing.driver, outcome.desired
    lo, hi = current.min_replicas, current.max_replicas
    if desired == hi and raw > hi:
        driver_note = f"; wants {raw}, limited at maxReplicas {hi}"
    elif outcome.limited == "min":
        driver_note = f"; minReplicas {lo}"
    else:
        driver_note = ""
    reason = _reason(signals, a, sizing, driver, raw, desired, current, outcome.why)
    reason += driver_note
    if floor.standing is not None and driver == "bursts":
        reason += f"; {floor.standing.reason()}"
    limited = outcome.limited
    return Decision(
        previous=current.desired,
        desired=desired,
        reason=reason,
        driver="hold" if outcome.held is not None else driver,
        history=history,
        held=outcome.held,
        panic=outcome.panicking,
        limited="max" if limited == "max" else "min" if limited == "min" else None,
        details=sizing.details,
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


def _scale_up_on_partial(
    spec: LLMServiceSpec,
    current: FleetState,
    signals: Signals,
    history: History,
    held: History,
    now: float,
    params: PolicyParams,
    ceiling: Ceiling | None,
) -> Decision | None:
    """PartialData, re-examined: fewer replicas report than are ready (a replica just ready
    whose first scrape is still to come, or one Prometheus cannot reach). The reporting
    replicas' signals still say what they carry: a breach there, or arrivals beyond them,
    is real, and the missing reports cannot make it smaller. So decide on the reporting
    replicas alone and act only if that scales up; else hold as before. Nothing is learnt
    (the window is not trusted) and no scale-down follows until a whole stabilization window
    of complete data (`held`'s trusted_since stays None)."""
    seen = replace(current, ready=signals.reporting_replicas)
    untrusted = replace(history, trusted_since=None)
    decision = _decide_trusted(spec, seen, signals, untrusted, now, params, ceiling)
    if decision.desired <= current.desired:
        return None
    after = replace(
        decision.history,
        trusted_since=None,
        capacity=held.capacity,
        last_ready=held.last_ready,
        ready_changed_at=held.ready_changed_at,
        ready_grew_at=held.ready_grew_at,
    )
    note = (
        f"PartialData: {signals.reporting_replicas} of {current.ready} ready replicas report, "
        "deciding on them (scale-up only): "
    )
    return replace(decision, reason=note + decision.reason, history=after)


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


def _feed_forward(history: History, mix_capacity: float | None) -> History:
    cap = history.capacity
    if mix_capacity is None or mix_capacity <= 0 or cap is None or cap.predicted <= 0:
        return history
    if mix_capacity == cap.predicted:
        return history
    scale = mix_capacity / cap.predicted
    observed = cap.observed * scale if cap.observed is not None else None
    return replace(history, capacity=CapacityEstimate(mix_capacity, observed))


def _in_flight(s: Signals) -> float | None:
    """Requests arrived and not finished: running and waiting in the engines, and held at
    the endpoint picker (spec.routing), which the engines have not seen yet."""
    if s.running_per_replica is None or s.waiting_per_replica is None:
        return None
    engines = (s.running_per_replica + s.waiting_per_replica) * s.reporting_replicas
    return engines + (s.picker_queued or 0.0)


def _demand(
    s: Signals, history: History, now: float, params: PolicyParams
) -> tuple[float, float, History]:
    """Arrivals per second, now and over the signals' window. A saturated fleet finishes
    only what it can, so the finish rate alone hides the load that queues (Knative sizes
    from observed concurrency for the same reason).

    Now (the feed-forward): finished req/s plus the growth of the requests in flight
    (engines and picker) since the last decision, so a queue building up is seen at once.
    Over the window (the trend): finished req/s plus the growth of the waiting requests
    (engines' queues and the picker's) since the decision one rate window ago, the finish
    rate's own time base, so it rises with the load even while a saturated fleet's finish
    rate stays flat; the finish rate alone until such a decision exists. Only the queue:
    requests running track the load they serve (Little's law) and need no forecast."""
    rate = s.request_rate or 0.0
    in_flight = _in_flight(s)
    if in_flight is None:
        return rate, rate, replace(history, last_in_flight=None, queued=())
    demand = rate
    last = history.last_in_flight
    if last is not None and 0 < now - last[0] <= params.stale_after_seconds:
        demand = max(0.0, rate + (in_flight - last[1]) / (now - last[0]))
    window = params.learn_settle_seconds
    queued = (s.waiting_per_replica or 0.0) * s.reporting_replicas + (s.picker_queued or 0.0)
    kept = tuple(p for p in history.queued if now - p[0] <= window)
    arrivals = rate
    if kept and now - kept[0][0] >= window / 2:
        arrivals = max(0.0, rate + (queued - kept[0][1]) / (now - kept[0][0]))
    history = replace(history, last_in_flight=(now, in_flight), queued=(*kept, (now, queued)))
    return demand, arrivals, history


def _trend(
    rate: float, history: History, now: float, params: PolicyParams
) -> tuple[float, History]:
    """Slope (req/s per s) of the arrival rate over the trend window: newer half's mean
    minus older half's, over their time apart. Unlike a least-squares fit, a rate that
    alternates (flapping input) has no trend at all."""
    start = now - params.trend_window_seconds
    points = (*(p for p in history.rates if p[0] > start), (now, rate))
    history = replace(history, rates=points)
    if len(points) < 4 or points[-1][0] - points[0][0] < params.trend_window_seconds / 2:
        return 0.0, history
    k = len(points) // 4 * 2  # two halves of an even length: alternating samples cancel out
    older, newer = points[-2 * k : -k], points[-k:]
    t_old = sum(t for t, _ in older) / len(older)
    t_new = sum(t for t, _ in newer) / len(newer)
    r_old = sum(r for _, r in older) / len(older)
    r_new = sum(r for _, r in newer) / len(newer)
    # Both halves are noisy estimates: the variance of their difference is the sum of theirs.
    noise = params.trend_noise_z * math.sqrt(
        (max(r_old, 0.0) + max(r_new, 0.0)) / params.learn_settle_seconds
    )
    rise = max(0.0, r_new - r_old - noise)
    return (rise / (t_new - t_old) if t_new > t_old else 0.0), history


def _window_covers_fleet(history: History, now: float, params: PolicyParams) -> bool:
    grew = history.ready_grew_at
    return grew is None or now - grew >= params.learn_settle_seconds


def _track_ready(
    history: History, current: FleetState, now: float, params: PolicyParams
) -> History:
    """Remember the ready counts of the window (for _learn); the last_ready bookkeeping is
    updated after learning, so the previous count still counts this time."""
    window = now - params.learn_settle_seconds
    samples = (*(p for p in history.ready_samples if p[0] > window), (now, current.ready))
    return replace(history, ready_samples=samples)


def _note_ready(history: History, current: FleetState, now: float) -> History:
    if history.last_ready != current.ready:
        grew = history.last_ready is not None and current.ready > history.last_ready
        return replace(
            history,
            last_ready=current.ready,
            ready_changed_at=now,
            ready_grew_at=now if grew else history.ready_grew_at,
        )
    return history


# -- what the signals say --------------------------------------------------------------------------
def _assess(
    spec: LLMServiceSpec,
    s: Signals,
    current: FleetState,
    params: PolicyParams,
    unattainable: float = 0.0,
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
    # A window of n requests misses by chance: with miss probability p (the SLO's budget
    # plus the traffic's unattainable share, whose count per window varies too) the share
    # missed has standard deviation sqrt(p / n). Only a shortfall beyond trend_noise_z of
    # those is evidence: at 0.2 req/s one miss in twelve requests is not a breach.
    n = (s.request_rate or 0.0) * params.learn_settle_seconds
    p = (1 - slo.attainment) + unattainable
    noise = params.trend_noise_z * math.sqrt(p / n) if n > 0 else 1.0
    floor = 1 - (1 - slo.attainment) * params.attainment_breach_budgets - noise
    broke = (ratio is not None and ratio > 1 + tol) or (
        attainment is not None and attainment < floor
    )
    comfortable = (
        ratio is not None
        and ratio <= 1.0
        and attainment is not None
        and attainment >= 1 - (1 - slo.attainment) * params.learn_comfort_budget
    )
    panic = (ratio is not None and ratio >= params.panic_ttft_ratio) or (
        attainment is not None and attainment < slo.attainment - params.panic_attainment_gap - noise
    )
    return _Assessment(ratio, attainment, floor, noise, broke, comfortable, panic)


def _breach_recommendations(t: _Tick, a: _Assessment, ready: int) -> dict[str, int]:
    """Replicas each breached SLO signal asks for (absent when it is within target)."""
    spec, s, params = t.spec, t.signals, t.params
    out: dict[str, int] = {}
    tol = params.tolerance
    # Past saturation TTFT grows with the backlog, not with the missing capacity, so each
    # signal asks for at most x2 the ready replicas per decision (AIBrix: up x2); the
    # feed-forward on demand sizes big jumps.
    cap = params.scale_up_rate
    if a.ttft_ratio is not None and a.ttft_ratio > 1 + tol:
        out["ttft"] = math.ceil(ready * min(a.ttft_ratio, cap))
    if a.attainment is not None and a.attainment < a.floor:
        # Misses scale like load past capacity; at least one more replica.
        ratio = spec.slo.attainment / max(a.attainment, 0.01)
        out["attainment"] = max(ready + 1, math.ceil(ready * min(ratio, cap)))
    waiting, running = s.waiting_per_replica, s.running_per_replica
    if waiting is not None and waiting >= params.queue_per_replica_threshold:
        # The queued requests need the slots the running ones have: (running + waiting) / running.
        busy = max(running or 0.0, 1.0)
        out["queue"] = math.ceil(ready * min((busy + waiting) / busy, cap))
    return out


# -- capacity that learns --------------------------------------------------------------------------
@dataclass(frozen=True)
class _Headroom:
    """The load a fleet must be sized for, its bursts' headroom included (dispersion.py)."""

    excess_idc: float
    residence_s: float | None
    attainment: float

    @staticmethod
    def of(spec: LLMServiceSpec, s: Signals) -> _Headroom:
        # Little's law: requests running / requests finishing per second = the seconds a
        # request holds a slot (waiting excluded: a queue is what the headroom prevents).
        rate, running = s.request_rate, s.running_per_replica
        residence = None
        if rate and rate > 0 and running is not None and s.reporting_replicas > 0:
            residence = running * s.reporting_replicas / rate
        excess = dispersion.excess_dispersion(s.arrival_dispersion)
        return _Headroom(excess, residence, spec.slo.attainment)

    def load(self, load: float) -> float:
        return dispersion.effective_load(load, self.excess_idc, self.residence_s, self.attainment)


NO_HEADROOM = _Headroom(0.0, None, 0.5)


def _learn(
    t: _Tick, history: History, a: _Assessment, demand: float, headroom: _Headroom = NO_HEADROOM
) -> CapacityEstimate:
    """Correct the per-replica capacity from the load per ready replica at which the SLO held
    or broke. Bounded per decision and to [0.25, 4] x predicted. Loads count their bursts'
    headroom (`headroom`): the capacity learnt is net of it, so it holds at any fleet size."""
    spec, current, s, now, params = t.spec, t.current, t.signals, t.now, t.params
    cap = history.capacity
    if cap is None or cap.predicted <= 0:
        return cap or CapacityEstimate(predicted=0.0)
    # The signals cover the last window: charge a breach to the fewest replicas that were
    # ready in it (the highest load per replica) and a success to the most (the lowest), so
    # a fleet that just grew or shrank cannot make the estimate optimistic. Replicas still
    # starting serve nothing and do not count.
    window = now - params.learn_settle_seconds
    counts = [n for t, n in history.ready_samples if t > window] + [current.ready]
    if history.last_ready is not None:
        counts.append(history.last_ready)
    fewest, most = min(counts), max(counts)
    rate = s.request_rate
    observed_window = history.trusted_since is not None and history.trusted_since <= window
    if not observed_window or fewest <= 0 or rate is None or rate <= 0:
        return cap  # the first minute after a start or a hold: the window is not ours yet
    eff = cap.effective
    target_util = spec.autoscaling.target_utilization
    target: float | None = None
    if a.broke:
        # A fleet draining a backlog (requests in flight falling) breaks the SLO at any load:
        # that says nothing about capacity. Otherwise capacity <= the load that broke it
        # (arrivals, which a saturated fleet's finish rate understates).
        recovering = demand < rate * params.learn_recovering_ratio
        r = headroom.load(max(demand, rate)) / fewest
        if not recovering and r * params.learn_break_margin < eff:
            target = r * params.learn_break_margin
    elif a.attainment is not None and a.attainment < spec.slo.attainment - a.noise:
        # Burning the error budget without a clear breach, below the believed capacity:
        # nudge down; the misses may be load-independent (a long prompt), so no jump to r.
        if headroom.load(rate) / most < eff:
            missed = max(0.0, 1 - a.attainment - a.noise)
            budgets = missed / max(1 - spec.slo.attainment, 1e-6)
            target = eff * (1 - params.learn_nudge_down * budgets)
    else:
        r = headroom.load(min(demand, rate)) / most
        met = a.attainment is None or a.attainment >= spec.slo.attainment
        if r > eff and met:  # held above what we believed: capacity >= r
            # Only a met SLO proves r: a window inside the noise band under the target (a
            # bursty ramp) is the edge, not headroom to raise the capacity into.
            target = r
        elif a.comfortable and r >= eff * target_util * params.learn_probe_utilization:
            target = eff * params.learn_probe_factor
        elif not a.comfortable and r < eff * target_util * params.learn_probe_utilization:
            # Held, but using most of the error budget, well below the operating point: the
            # fleet is nearer its edge than believed. Nudge down as for a mild miss (3% per
            # error budget used); without this an optimistic model is corrected only by a
            # breach, i.e. after the SLO is lost (bursty, seed 2: 97.0% -> 99.0%).
            # Only the misses beyond the window's counting noise are evidence (a window of
            # a few hundred requests misses a budget or two by chance, more so when the
            # traffic has unattainable requests whose count per window varies too).
            missed = max(0.0, 1 - (a.attainment or 1.0) - a.noise)
            budgets = missed / max(1 - spec.slo.attainment, 1e-6)
            if budgets > 0:
                target = eff * (1 - params.learn_nudge_down * budgets)
    if target is None:
        return cap
    lo_b, hi_b = params.learn_bounds
    step = min(max(target, eff * params.learn_down_factor), eff * params.learn_up_factor)
    observed = min(max(step, cap.predicted * lo_b), cap.predicted * hi_b)
    return replace(cap, observed=observed)


# -- windows, steps, cooldowns ---------------------------------------------------------------------
def _apply_rate_limits(
    t: _Tick,
    history: History,
    bounded: int,
    panicking: bool,
    outgrown: bool,
    draining: int,
    slo_met: bool,
) -> tuple[int, HoldReason | None, str]:
    """`outgrown`: the demand needs more than every replica asked for, at full utilisation;
    `draining`: the replicas that serve it and drain the queue within a cold start."""
    spec, current, now, params = t.spec, t.current, t.now, t.params
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
    if panicking and bounded > desired and (current.starting == 0 or outgrown):
        # Knative panic: straight to the recommendation, past the step limit and past what
        # is already starting when the load outgrows even those (the recommendation counts
        # ready replicas only). When the starting replicas cover the load, a TTFT that stays
        # high is the backlog draining, not missing capacity: spike 1.73x -> 1.63x the
        # oracle's GPU-hours at the same attainment in autoscale-sim.
        return bounded, None, "panic: jump to the recommendation"
    if bounded > desired:
        step = max(scaling.max_scale_up_step, math.ceil(desired * (params.scale_up_rate - 1)))
        target = min(up_recs)  # the signal must ask for more over the whole short window
        why = "scale up"
        if current.starting > 0 and not outgrown:
            if draining <= desired:
                why = f"{current.starting} replica(s) still starting"
                return desired, "ReplicasStarting", why
            # The starting replicas serve the arrivals but leave the queue: only the
            # replicas that drain it, not what the (lagging) SLO signals ask for.
            target = min(target, draining)
            why = f"scale up: {current.starting} starting replica(s) would not drain the queue"
        if target <= desired:
            return desired, None, "scale-up waits for the up stabilization window"
        return min(target, desired + step), None, why
    if bounded < desired:
        if panicking:
            return desired, None, "no scale-down while panicking"
        if not slo_met:
            return desired, "Stabilizing", "no scale-down while the SLO is not met"
        target = max(down_recs)  # the highest recommendation of the down window
        if target >= desired:
            return desired, "Stabilizing", "scale-down waits for the stabilization window"
        last = history.last_scale_down_at
        if last is not None and now - last < params.scale_down_cooldown_seconds:
            return desired, "Cooldown", "too soon after the last scale-down"
        step = max(
            scaling.max_scale_down_step, math.floor(desired * (1 - 1 / params.scale_down_rate))
        )
        return max(target, desired - step), None, "scale down"
    return desired, None, "at the recommendation"


def _reason(
    s: Signals,
    a: _Assessment,
    sizing: _Sizing,
    driver: str,
    raw: int,
    desired: int,
    current: FleetState,
    why: str,
) -> str:
    rate, cap = sizing.rate, sizing.capacity
    seen = [f"{rate:.3g} req/s on {current.ready} ready"]
    if sizing.load > rate * 1.05 + 0.01:
        # Arrivals beyond the finish rate: the queue's growth, what a saturated fleet hides.
        seen[0] = f"{sizing.load:.3g} req/s arriving ({rate:.3g} finished) on {current.ready} ready"
    if a.queue_wait is not None and a.ttft_ratio is not None:
        # With the traffic's ceiling the policy reads the queue wait, not the TTFT: say so.
        wait, budget = a.queue_wait
        seen.append(
            f"queue wait {wait * 1000:.0f} ms ({a.ttft_ratio:.2f}x its "
            f"{budget * 1000:.0f} ms budget)"
        )
    elif a.ttft_ratio is not None and s.ttft_quantile_seconds is not None:
        seen.append(f"TTFT {s.ttft_quantile_seconds * 1000:.0f} ms ({a.ttft_ratio:.2f}x SLO)")
    if a.attainment is not None:
        seen.append(f"attainment {a.attainment:.3f}")
    seen.append(f"capacity {cap.effective:.3g} req/s/replica")
    move = f"{current.desired} -> {desired}" if desired != current.desired else f"{desired} kept"
    return f"{', '.join(seen)}; {driver} wants {raw}; {move} ({why})"
