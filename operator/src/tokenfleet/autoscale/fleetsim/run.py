"""Replay one trace against the modelled fleet under one autoscaler, deterministically.

Setup (once per trace): plan the replica with the capacity model (`tokenfleet.capacity.plan`
+ `step_model`), measure the replica's real capacity in the model (the highest Poisson rate
whose SLO attainment still meets the target: what the static and oracle baselines get), and
derive the static peak and the oracle's schedule from the trace. Then, per autoscaler: every
15 s (the scrape interval) bring the fleet to that time, compute the signals Prometheus would
show, and let the autoscaler decide when its period comes round.
"""

from __future__ import annotations

import dataclasses
import math
import random
from dataclasses import dataclass, field, replace
from typing import Any

from tokenfleet.api.spec import LLMServiceSpec
from tokenfleet.autoscale.attainability import (
    Ceiling,
    LengthHistogram,
    ceiling,
    idle_tpot,
    longest_prompt,
    targets,
)
from tokenfleet.autoscale.fleetsim import observed
from tokenfleet.autoscale.fleetsim.fleet import Fleet, ReplicaShape
from tokenfleet.autoscale.fleetsim.mixfeed import MixFeed
from tokenfleet.autoscale.fleetsim.peers import PEERS, best_of
from tokenfleet.autoscale.fleetsim.policies import (
    Autoscaler,
    FleetView,
    Hold,
    Oracle,
    Reactive,
    Static,
    Tokenfleet,
    needed_replicas,
)
from tokenfleet.autoscale.fleetsim.replica import FleetRequest
from tokenfleet.autoscale.fleetsim.tracefiles import Dropped
from tokenfleet.autoscale.fleetsim.traces import Trace
from tokenfleet.autoscale.mix import mix_capacity
from tokenfleet.autoscale.types import FleetState
from tokenfleet.capacity import PlanError, PlanRequest, get_gpu, load_model, plan, step_model
from tokenfleet.capacity.load import Replica
from tokenfleet.capacity.pinned import pin_layout
from tokenfleet.engines import engine
from tokenfleet.errors import UserError

POLICIES = ("tokenfleet", "keda", "kserve", "hpa", "static", "reactive", "hold", "oracle")
ORACLE_BUCKET_S = 60.0  # the oracle and the static provision plan per minute of load
CAPACITY_PROBE_S = 300.0  # length of each run when measuring capacity
CAPACITY_FLEET = 8  # replicas in that run: about the fleets the built-in traces need
REACHABLE_PROBE_REQUESTS = 1000  # a light-load probe of this many requests checks the goal
MAX_REPLICAS_LIMIT = 1000  # api/autoscaling.py: autoscaling.maxReplicas le=1000


DEFAULT_MODEL = "meta-llama/Llama-3.1-8B"
DEFAULT_GPU = "l40s"
DEFAULT_MAX_MODEL_LEN = 8192


def default_spec() -> LLMServiceSpec:
    """The LLMService replayed when none is given: Llama-3.1-8B on an L40S, the operator's
    SLO and autoscaling defaults, deciding at the 15 s scrape cadence."""
    return LLMServiceSpec.model_validate(
        {
            "model": {"id": DEFAULT_MODEL},
            "gpu": {"type": DEFAULT_GPU},
            "workload": {"maxModelLen": DEFAULT_MAX_MODEL_LEN},
            "autoscaling": {"enabled": True, "intervalSeconds": 15},
        }
    )


def with_flags(
    spec: LLMServiceSpec,
    *,
    model: str | None = None,
    gpu: str | None = None,
    engine: str | None = None,
    max_model_len: int | None = None,
    ttft_ms: float | None = None,
    tpot_ms: float | None = None,
    min_replicas: int | None = None,
    max_replicas: int | None = None,
    scale_to_zero_after: int | None = None,
    target_utilization: float | None = None,
) -> LLMServiceSpec:
    """`spec` with each flag that was given (not None) in its field, by model_copy: a flag
    left at None keeps what the spec says (a replayed LLMService's, or the defaults)."""
    given: dict[str, dict[str, Any]] = {
        "model": {"id": model},
        "gpu": {"type": gpu},
        "engine": {"kind": engine},
        "workload": {"max_model_len": max_model_len},
        "slo": {"ttft_ms": ttft_ms, "tpot_ms": tpot_ms},
        "autoscaling": {
            "min_replicas": min_replicas,
            "max_replicas": max_replicas,
            "scale_to_zero_after_seconds": scale_to_zero_after,
            "target_utilization": target_utilization,
        },
    }
    update: dict[str, Any] = {}
    for section, fields in given.items():
        values = {name: value for name, value in fields.items() if value is not None}
        if values:
            update[section] = getattr(spec, section).model_copy(update=values)
    return spec.model_copy(update=update)


@dataclass(frozen=True)
class SimOptions:
    spec: LLMServiceSpec = field(default_factory=default_spec)
    """The LLMService replayed: model, GPU, engine, max-model-len, SLO and autoscaling (the
    flags' or a resource's, with_flags). prepare() sets its request lengths from the trace."""
    cold_start: float = 120.0  # reference/autoscaling.md: 1-5 min for 7-70B models
    capacity_error: float = 1.0
    peak_max_replicas: bool = True
    """maxReplicas twice the static peak provision (the flags' default); False: the spec's."""
    seed: int = 0
    strict: bool = False  # refuse a trace with rows the model cannot serve, instead of dropping
    routing: str = "load"  # fleetsim.fleet.ROUTINGS: the router in front of the replicas
    request: PlanRequest | None = None
    """The layout to replay (the plan flags, or an LLMService's): None plans model + gpu +
    engine as the planner would. Its lengths and SLO are replaced by the trace's and ours."""
    peer_thresholds: str = "best"
    """best: each peer at its best threshold of a small sweep on this trace (peers.py);
    documented: at the value its guide ships."""

    @classmethod
    def of(
        cls,
        *,
        cold_start: float = 120.0,
        capacity_error: float = 1.0,
        seed: int = 0,
        request: PlanRequest | None = None,
        **flags: Any,
    ) -> SimOptions:
        """The default LLMService with the given flags (with_flags' names)."""
        return cls(
            with_flags(default_spec(), **flags),
            cold_start=cold_start,
            capacity_error=capacity_error,
            peak_max_replicas=flags.get("max_replicas") is None,
            seed=seed,
            request=request,
        )

    # The spec's fields the replay reads, by the flags' names.
    @property
    def model(self) -> str:
        return self.spec.model.id

    @property
    def gpu(self) -> str:
        return self.spec.gpu.type

    @property
    def engine(self) -> str:
        return self.spec.engine.kind

    @property
    def max_model_len(self) -> int:
        return self.spec.workload.max_model_len or DEFAULT_MAX_MODEL_LEN

    @property
    def ttft_ms(self) -> float:
        return self.spec.slo.ttft_ms

    @property
    def tpot_ms(self) -> float:
        return self.spec.slo.tpot_ms

    @property
    def attainment(self) -> float:
        return self.spec.slo.attainment

    @property
    def quantile(self) -> float:
        return self.spec.slo.quantile

    @property
    def min_replicas(self) -> int:
        return self.spec.autoscaling.min_replicas


@dataclass(frozen=True)
class Setup:
    trace: Trace
    options: SimOptions
    shape: ReplicaShape
    predicted_capacity: float  # plan() goodput at the mean lengths: our policy's start
    measured_capacity: float  # what one modelled replica really serves within the SLO
    need: tuple[int, ...]  # replicas per ORACLE_BUCKET_S at the measured capacity
    max_replicas: int
    spec: LLMServiceSpec
    attainable: float  # share of the trace's requests an idle replica serves within the SLO
    target: float  # the attainment the baselines are sized for (attainability.targets(),
    # lowered to what a lightly loaded fleet reaches: measure_capacity)
    longest_prompt: int  # the longest prompt whose idle prefill fits ttftMs
    notes: tuple[str, ...] = ()  # what was adjusted on the user's behalf (dropped rows, clamps)
    mix_capacity: float = 0.0  # plan() goodput at the trace's length mix (mix.py)
    mix_feed: MixFeed | None = None  # the same, from the mix observed so far (run_policy)

    @property
    def static_replicas(self) -> int:
        return max(self.need)


@dataclass(frozen=True)
class TimelinePoint:
    at: float
    load: float  # arrivals per second over the last rate window
    desired: int
    ready: int
    ttft_p95: float | None


@dataclass
class RunResult:
    name: str
    requests: int
    good: int
    duration: float
    gpu_hours: float
    scale_events: int
    timeline: list[TimelinePoint] = field(default_factory=list)
    autoscaler: Autoscaler | None = None
    routing: str = "load"
    prefix_hits: int = 0  # prompt tokens served from a replica's prefix cache
    prefix_queries: int = 0  # prompt tokens of the requests that carry prefix blocks
    ttft_good: int = 0  # requests whose first token came within ttftMs
    missed_at: tuple[float, ...] = ()  # arrival times of the requests that missed the SLO
    # A peer's thresholds (peers.py) and, when swept, every grid point's (values,
    # attainment, GPU-hours).
    thresholds: tuple[float, ...] = ()
    sweep: tuple[tuple[tuple[float, ...], float, float], ...] = ()

    @property
    def ttft_attainment(self) -> float:
        return self.ttft_good / self.requests if self.requests else 1.0

    @property
    def prefix_hit_rate(self) -> float:
        return self.prefix_hits / self.prefix_queries if self.prefix_queries else 0.0

    @property
    def attainment(self) -> float:
        return self.good / self.requests if self.requests else 1.0

    @property
    def goodput(self) -> float:
        return self.good / self.duration


def prepare(trace: Trace, options: SimOptions) -> Setup:
    if options.cold_start < 0:
        raise UserError("--cold-start", options.cold_start, "is negative", "pass 0 or more seconds")
    if options.capacity_error <= 0:
        raise UserError(
            "--capacity-error", options.capacity_error, "must be positive", "pass e.g. 0.5 or 2"
        )
    notes: list[str] = []
    trace = _servable(trace, options, notes)
    prompt = sum(r.prompt for r in trace.requests) / len(trace.requests)
    output = sum(r.output for r in trace.requests) / len(trace.requests)
    base = options.request or PlanRequest(
        arch=load_model(options.model, "--model"),
        gpu=get_gpu(options.gpu),
        engine=options.spec.engine.kind,
        max_model_len=options.max_model_len,
    )
    # The layout is the user's (flags or the LLMService); the mix is the trace's.
    p = plan(
        replace(
            base,
            input_tokens=max(1, round(prompt)),
            output_tokens=max(1, round(output)),
            ttft_slo_ms=options.ttft_ms,
            tpot_slo_ms=options.tpot_ms,
        )
    )
    nominal = p.predicted.goodput_requests_per_second
    # The feed-forward the operator would have: plan() at the observed mix (mix.py), the
    # layout pinned to the one planned.
    pinned = pin_layout(base, p, ttft_slo_ms=options.ttft_ms, tpot_slo_ms=options.tpot_ms)

    def goodput(prompt_tokens: int, output_tokens: int) -> float:
        if prompt_tokens + output_tokens > p.max_model_len:
            return 0.0
        request = replace(pinned, input_tokens=prompt_tokens, output_tokens=output_tokens)
        return plan(request).predicted.goodput_requests_per_second

    bounds = engine(p.engine).token_buckets(p.max_model_len)
    # The policy starts from plan() at the spec's lengths (the trace's means, as a user
    # would write them) and, once traffic is seen, feeds forward plan() at the observed
    # attainable mix (mix.py, MixFeed in run_policy), as the operator does.
    predicted = nominal
    if predicted <= 0:
        raise PlanError(
            "--model/--gpu",
            f"{options.model} on {options.gpu}",
            "cannot meet the SLO even with one request at a time (plan goodput 0)",
            "use a faster GPU or relax --ttft-slo-ms / --tpot-slo-ms",
        )
    # Each replica schedules as the planned engine version does (its admission rules too).
    config = Replica.for_plan(p).scheduler_config()
    shape = ReplicaShape(config, step_model(p), p.gpus_per_replica)
    longest = longest_prompt(
        shape.timer, config.max_num_batched_tokens, options.ttft_ms / 1000, p.max_model_len
    )
    prompts = LengthHistogram.of([r.prompt for r in trace.requests], bounds, p.max_model_len)
    mix = mix_capacity(prompts, prompt, output, longest, goodput)
    mix_rate = mix.requests_per_second if mix is not None else 0.0
    ok = sum(1 for r in trace.requests if _attainable(r.prompt, r.output, shape, longest, options))
    attainable = ok / len(trace.requests)
    target, _ = targets(options.attainment, attainable)
    measured, target = measure_capacity(shape, trace, options, target)
    need = tuple(
        needed_replicas(trace.rate_per_bucket(ORACLE_BUCKET_S), measured, options.min_replicas)
    )
    hi = (
        max(2 * max(need), options.min_replicas)
        if options.peak_max_replicas
        else options.spec.autoscaling.max_replicas
    )
    if hi > MAX_REPLICAS_LIMIT:
        notes.append(
            f"maxReplicas {hi} (twice the static peak) clamped to the API's limit "
            f"{MAX_REPLICAS_LIMIT}; pass --max-replicas to choose"
        )
        hi = MAX_REPLICAS_LIMIT
    spec = _replayed_spec(options.spec, p.engine, p.max_model_len, prompt, output, hi)
    return Setup(
        trace,
        options,
        shape,
        predicted,
        measured,
        need,
        hi,
        spec,
        attainable,
        target,
        longest,
        tuple(notes),
        mix_rate,
        MixFeed(goodput, tuple(bounds), p.max_model_len),
    )


def _replayed_spec(
    spec: LLMServiceSpec,
    engine: str,
    max_model_len: int,
    prompt: float,
    output: float,
    max_replicas: int,
) -> LLMServiceSpec:
    """The spec the replayed operator acts on: the given one, at the trace's mean lengths and
    the planned engine and context, autoscaling on, and the endpoint picker in front exactly
    when minReplicas is 0 (it holds requests at zero)."""
    workload = spec.workload.model_copy(
        update={
            "max_model_len": max_model_len,
            "input_tokens": round(prompt),
            "output_tokens": round(output),
        }
    )
    autoscaling = spec.autoscaling.model_copy(
        update={"enabled": True, "max_replicas": max_replicas}
    )
    routing = spec.routing.model_copy(update={"enabled": spec.autoscaling.min_replicas == 0})
    return spec.model_copy(
        update={
            "engine": spec.engine.model_copy(update={"kind": engine}),
            "workload": workload,
            "autoscaling": autoscaling,
            "routing": routing,
        }
    )


def _servable(trace: Trace, options: SimOptions, notes: list[str]) -> Trace:
    """Drop (or, strict, refuse) the requests the model cannot serve: longer than
    max-model-len, as the engine would reject them."""
    limit = options.max_model_len
    too_long = [r for r in trace.requests if r.prompt + r.output > limit]
    if too_long and options.strict:
        r = too_long[0]
        raise UserError(
            "--trace",
            trace.name,
            f"has {len(too_long)} request(s) longer than max-model-len {limit} "
            f"(first at {r.at:.1f} s: {r.prompt} + {r.output} tokens)",
            "raise --max-model-len, drop those rows, or leave out --strict to drop them",
        )
    dropped = Dropped(dict(trace.dropped.counts), dict(trace.dropped.first))
    for r in too_long:
        dropped.add(
            f"longer than max-model-len {limit}", f"{r.prompt} + {r.output} tokens at {r.at:.1f} s"
        )
    kept = tuple(r for r in trace.requests if r.prompt + r.output <= limit)
    if not kept:
        raise UserError(
            "--trace",
            trace.name,
            f"has no request within max-model-len {limit}",
            "raise --max-model-len",
        )
    if dropped.total:
        notes.append(
            f"dropped {dropped.total:,} of {dropped.total + len(kept):,} rows: {dropped.summary()}"
        )
    return replace(trace, requests=kept, dropped=dropped)


def _attainable(
    prompt: int, output: int, shape: ReplicaShape, longest: int, options: SimOptions
) -> bool:
    """Whether an idle replica serves this request within the SLO (its prefill and its
    decode pace alone)."""
    if prompt > longest:
        return False
    return output <= 1 or idle_tpot(shape.timer, prompt, output) <= options.tpot_ms / 1000


def measure_capacity(
    shape: ReplicaShape, trace: Trace, options: SimOptions, target: float | None = None
) -> tuple[float, float]:
    """(rate, attainment it holds): the highest steady rate per replica that a warm fleet
    of CAPACITY_FLEET replicas, behind the same router, serves at the SLO attainment
    target, with request sizes drawn from the trace and arrivals as bursty as the trace's
    (gamma gaps with its CV; Poisson for CV 1), by seeded bisection. A fleet, not one
    replica: routing pools the variance, and the oracle must be a lower bound for fleets of
    that size. Bursts cost capacity: at Poisson capacity the oracle missed the SLO on
    `bursty` (98.0%). `target`: the attainment to hold (default slo attainment); on traffic
    whose ceiling is lower, the ceiling's target, else no rate would do and the baselines
    would collapse to 0.01 req/s."""
    goal = options.attainment if target is None else target
    sizes = [(r.prompt, r.output) for r in trace.requests]
    gamma_k = 1.0 / max(trace.arrival_cv, 0.1) ** 2  # gamma shape; 1 = exponential gaps

    def attained(rate: float) -> bool:
        rng = random.Random(f"capacity:{options.seed}")
        fleet = Fleet(shape, 0.0, options.seed)
        fleet.start(CAPACITY_FLEET, 0.0, warm=True)
        requests: list[FleetRequest] = []
        t = 0.0
        while True:
            t += rng.gammavariate(gamma_k, 1.0 / (gamma_k * rate * CAPACITY_FLEET))
            if t >= CAPACITY_PROBE_S:
                break
            prompt, output = rng.choice(sizes)
            request = FleetRequest(t, prompt, output)
            fleet.route(request, t)
            requests.append(request)
        fleet.finish(CAPACITY_PROBE_S)
        counted = [r for r in requests if r.arrival >= 60.0] or requests  # skip the warm-up
        return _good_fraction(counted, options) >= goal

    # Where even a lightly loaded fleet misses the goal (bursts of long prompts colliding on
    # a replica), lower it half an error budget at a time to what a fleet reaches: the
    # baselines then answer "what does the reachable attainment cost", never "0.01 req/s".
    light = REACHABLE_PROBE_REQUESTS / (CAPACITY_PROBE_S * CAPACITY_FLEET)
    step = (1 - options.attainment) / 2
    while not attained(light) and goal > step:
        goal -= step
    lo, hi = 0.0, 1.0
    while attained(hi) and hi < 1e4:
        lo, hi = hi, hi * 2
    for _ in range(8):  # a bracket of 2x split 8 times: 0.4% resolution
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if attained(mid) else (lo, mid)
    return max(lo, 1e-3), goal


def _good(request: FleetRequest, options: SimOptions) -> bool:
    return request.finished_at is not None and (
        request.ttft <= options.ttft_ms / 1000 and request.tpot <= options.tpot_ms / 1000
    )


def _good_fraction(requests: list[FleetRequest], options: SimOptions) -> float:
    return sum(1 for r in requests if _good(r, options)) / max(len(requests), 1)


def make_autoscaler(
    name: str, setup: Setup, thresholds: tuple[float, ...] | None = None
) -> Autoscaler:
    """The policy `name`; a peer (peers.py) at `thresholds`, default its documented ones."""
    o = setup.options
    oracle = Oracle(setup.need, ORACLE_BUCKET_S, o.cold_start)
    start = oracle.initial()  # every reactive policy starts from what the first minutes need
    if name == "tokenfleet":
        return Tokenfleet(
            setup.spec,
            setup.predicted_capacity * o.capacity_error,
            start,
            period=float(setup.spec.autoscaling.interval_seconds),
            capacity_error=o.capacity_error,
        )
    if name in PEERS:
        # Their signals are the engines' own, gone at zero replicas: never below one.
        peer = PEERS[name]
        values = thresholds or peer.documented
        return peer.build(values, start, max(1, o.min_replicas), setup.max_replicas)
    if name == "static":
        return Static(setup.static_replicas)
    if name == "oracle":
        return oracle
    if name == "reactive":
        return Reactive(setup.need, ORACLE_BUCKET_S, o.cold_start)
    if name == "hold":
        window = float(setup.spec.autoscaling.scale_down_stabilization_seconds)
        return Hold(setup.need, ORACLE_BUCKET_S, o.cold_start, hold=window)
    raise UserError("--policy", name, "is not a policy", f"use one of {', '.join(POLICIES)} or all")


def run_policy(setup: Setup, autoscaler: Autoscaler, routing: str | None = None) -> RunResult:
    o = setup.options
    trace = setup.trace
    routing = routing or o.routing
    fleet = Fleet(setup.shape, o.cold_start, o.seed, routing=routing)
    fleet.start(autoscaler.initial(), 0.0, warm=True)
    window = observed.Window([], [])
    requests = [FleetRequest(r.at, r.prompt, r.output, blocks=r.blocks) for r in trace.requests]
    # Each replay re-plans from its own observations: the feed keeps its last mix and
    # capacity, so a shared one would hand a policy what the previous replay saw.
    mix_feed = dataclasses.replace(setup.mix_feed) if setup.mix_feed is not None else None
    arrivals: list[float] = []
    timeline: list[TimelinePoint] = []
    step = observed.SCRAPE_INTERVAL_S
    every = max(1, round(autoscaler.period / step))
    index, tick = 0, 1
    while tick * step <= trace.duration:
        now = tick * step
        while index < len(requests) and requests[index].arrival < now:
            request = requests[index]
            fleet.route(request, request.arrival)
            arrivals.append(request.arrival)
            index += 1
        fleet.advance(now)
        first, done = fleet.events()
        window.first_tokens += [(r.first_token_at or now, r.ttft) for r in first]
        window.arrivals += sorted(r.first_token_at or now for r in first)
        window.waits += [(r.first_token_at or now, r.queue_wait) for r in first]
        window.prompts += [(r.first_token_at or now, r.prompt) for r in first]
        window.finishes += [(r.finished_at or now, r.tpot) for r in done]
        window.outputs += [(r.finished_at or now, r.output) for r in done]
        window.prune(now)
        ready = fleet.ready(now)
        signals = observed.signals(
            window,
            now,
            quantile=o.quantile,
            ttft_slo_s=o.ttft_ms / 1000,
            tpot_slo_s=o.tpot_ms / 1000,
            reporting=sum(1 for r in fleet.replicas if r.ready_at <= now),
            running=[r.model.running for r in ready],
            waiting=[len(r.model.waiting) for r in ready],
            kv_usage=[r.model.kv_used / setup.shape.config.kv_cache_tokens for r in ready],
        )
        if o.min_replicas == 0:  # the picker's flow-control queue: requests held at zero
            signals = dataclasses.replace(signals, picker_queued=float(len(fleet.pending)))
        recent = sum(1 for a in arrivals[-5000:] if a > now - observed.RATE_WINDOW_S)
        timeline.append(
            TimelinePoint(
                now,
                recent / observed.RATE_WINDOW_S,
                fleet.desired,
                len(ready),
                signals.ttft_quantile_seconds,
            )
        )
        if tick % every == 0:
            current = FleetState(fleet.desired, len(ready), o.min_replicas, setup.max_replicas)
            ceiling = observed_ceiling(setup, window, now)
            mix = None
            if ceiling is not None and mix_feed is not None:
                mix = mix_feed.capacity(
                    [p for at, p in window.prompts if at <= now],
                    [n for at, n in window.outputs if at <= now],
                    ceiling.longest_prompt,
                    now,
                )
            view = FleetView(now, current, signals, ceiling, mix)
            fleet.scale_to(autoscaler.decide(view), now)
        tick += 1
    for request in requests[index:]:
        fleet.advance(request.arrival)
        fleet.route(request, request.arrival)
    fleet.finish(trace.duration)
    missed_at = tuple(r.arrival for r in requests if not _good(r, o))
    return RunResult(
        name=autoscaler.name,
        requests=len(requests),
        good=len(requests) - len(missed_at),
        duration=trace.duration,
        gpu_hours=fleet.gpu_hours(),
        scale_events=fleet.scale_events,
        timeline=timeline,
        autoscaler=autoscaler,
        routing=routing,
        prefix_hits=sum(r.cached for r in requests),
        prefix_queries=sum(r.prompt for r in requests if r.blocks),
        missed_at=missed_at,
        ttft_good=sum(
            1 for r in requests if r.first_token_at is not None and r.ttft <= o.ttft_ms / 1000
        ),
    )


def observed_ceiling(setup: Setup, window: observed.Window, now: float) -> Ceiling | None:
    """The ceiling the operator would estimate now: the prompt-length histogram of the last
    MIX_WINDOW_S in the engine's own buckets, and the plan's step model."""
    prompts = [p for at, p in window.prompts if at <= now]
    if not prompts:
        return None
    o = setup.options
    config = setup.shape.config
    bounds = engine(o.engine).token_buckets(config.max_model_len)
    return ceiling(
        setup.shape.timer,
        config.max_num_batched_tokens,
        LengthHistogram.of(prompts, bounds, config.max_model_len),
        ttft_ms=o.ttft_ms,
        slo_attainment=o.attainment,
        quantile=o.quantile,
    )


def run(
    trace: Trace, options: SimOptions, policies: tuple[str, ...] = POLICIES
) -> tuple[Setup, dict[str, RunResult]]:
    setup = prepare(trace, options)
    results = {}
    for name in policies:
        if name in PEERS:
            results[name] = run_peer(setup, name)
        else:
            results[name] = run_policy(setup, make_autoscaler(name, setup))
    return setup, results


def run_peer(setup: Setup, name: str) -> RunResult:
    """A peer at its documented thresholds, or (options.peer_thresholds "best") at the best
    point of its grid on this trace: the fewest GPU-hours reaching the attainment ours aims
    at (the most attainment when none does; peers.best_of)."""
    peer = PEERS[name]
    if setup.options.peer_thresholds == "documented":
        result = run_policy(setup, make_autoscaler(name, setup, peer.documented))
        return dataclasses.replace(result, thresholds=peer.documented)
    runs = {v: run_policy(setup, make_autoscaler(name, setup, v)) for v in peer.grid}
    sweep = tuple((v, r.attainment, r.gpu_hours) for v, r in runs.items())
    target, _ = targets(setup.options.attainment, setup.attainable)
    best = best_of(list(sweep), target)
    return dataclasses.replace(runs[best], thresholds=best, sweep=sweep)


def run_routings(
    setup: Setup,
    policies: tuple[str, ...],
    routings: tuple[str, ...],
    thresholds: dict[str, tuple[float, ...]] | None = None,
) -> dict[str, dict[str, RunResult]]:
    """Each policy replayed behind each router: what affinity buys on a trace with
    prefix blocks, in hit rate, attainment and GPU-hours. A peer runs at `thresholds[name]`
    (the ones run() chose), default its documented ones."""
    chosen = thresholds or {}
    return {
        routing: {
            name: run_policy(setup, make_autoscaler(name, setup, chosen.get(name)), routing)
            for name in policies
        }
        for routing in routings
    }


def ratio(a: float, b: float) -> float:
    return a / b if b else math.inf
