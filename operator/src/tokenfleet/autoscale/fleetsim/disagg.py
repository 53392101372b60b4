"""`autoscale-sim --serving disaggregated|compare`: the trace on a prefill fleet and a decode
fleet joined by the KV transfer, each pool scaled as the operator scales it. Deterministic.

The plan is `plan()` with serving mode disaggregated at the trace's mean lengths (the roles,
their layouts, goodputs, ratio band and the link). A request arrives at the prefill fleet as
(prompt, 1 token); when its prefill ends, its KV crosses the link (link.transfer_seconds at
its own prompt length) and it lands on the decode fleet, whose replicas time a landing as one
more decoding sequence (roles.DecodeTimer, at the trace's mean prompt: the per-step count of
landings is the prefilled tokens over it) and never run a prefill chunk. Its TTFT is the
decode fleet's first token less its arrival at the prefill fleet; its TPOT the decode
fleet's. Every 15 s scrape each pool's signals are what its pods would export; the decode
pool is decided by the operator's policy (policy.decide, fed forward by the decode role's
goodput, its signals the decode pods' alone), the prefill pool by autoscale/pools.py inside
the plan's band, zero with decode: controller/prefill_pool.py's rules, offline.
"""

from __future__ import annotations

import heapq
import math
from dataclasses import dataclass, replace

from tokenfleet.autoscale.fleetsim import observed
from tokenfleet.autoscale.fleetsim.fleet import Fleet, ReplicaShape
from tokenfleet.autoscale.fleetsim.policies import FleetView, Tokenfleet
from tokenfleet.autoscale.fleetsim.replica import FleetRequest
from tokenfleet.autoscale.fleetsim.run import RunResult, Setup, TimelinePoint
from tokenfleet.autoscale.pools import PrefillInputs, prefill_replicas
from tokenfleet.autoscale.types import FleetState
from tokenfleet.capacity import PlanError, PlanRequest, get_gpu, load_model, plan, step_model
from tokenfleet.capacity.disagg.link import transfer_seconds
from tokenfleet.capacity.disagg.request import ServingRequest
from tokenfleet.capacity.disagg.roles import DecodeTimer, decode_replica
from tokenfleet.capacity.disagg.types import Disaggregated
from tokenfleet.capacity.load import Replica

PD_NAME = "tokenfleet-pd"  # the replay's row in autoscale-sim's table


@dataclass(frozen=True)
class DisaggSetup:
    pair: Disaggregated
    prefill: ReplicaShape
    decode: ReplicaShape
    start: tuple[int, int]  # (prefill, decode) replicas warm at the start


def prepare_disaggregated(setup: Setup, network_gbit: float | None = None) -> DisaggSetup:
    """The roles for the trace's mean lengths, the replicas' shapes and the starting pools
    (the decode pool for the first minutes at the decode role's goodput, the prefill pool
    by the plan's ratio)."""
    o, trace = setup.options, setup.trace
    prompt = max(1, round(sum(r.prompt for r in trace.requests) / len(trace.requests)))
    output = max(1, round(sum(r.output for r in trace.requests) / len(trace.requests)))
    base = o.request or PlanRequest(
        arch=load_model(o.model, "--model"), gpu=get_gpu(o.gpu), engine=o.spec.engine.kind,
        max_model_len=o.max_model_len,
    )  # fmt: skip
    s = o.spec.serving
    gbit = network_gbit if network_gbit is not None else s.network_gbps
    serving = ServingRequest("disaggregated", s.kv_link, gbit,
                             s.prefill.tensor_parallel_size, s.decode.tensor_parallel_size,
                             s.transfer_backend)  # fmt: skip
    request = replace(base, input_tokens=prompt, output_tokens=output, ttft_slo_ms=o.ttft_ms,
                      tpot_slo_ms=o.tpot_ms, serving=serving)  # fmt: skip
    p = plan(replace(request, target_requests_per_second=None))
    pair = p.serving.disaggregated if p.serving is not None else None
    if pair is None:
        raise PlanError(
            "--serving",
            "disaggregated",
            "no prefill / decode pair serves this trace's mean request within the SLO",
            "relax the SLO or serve aggregated",
        )
    # Each role's replicas schedule as the planner sized them: the engine version's
    # scheduler (its admission rules too), the decode role's taking every landing whole.
    pre = pair.prefill.plan
    prefill = ReplicaShape(
        Replica.for_plan(pre).scheduler_config(), step_model(pre), pre.gpus_per_replica
    )
    dec = pair.decode.plan
    decode = ReplicaShape(
        decode_replica(dec, prompt).scheduler_config(),
        DecodeTimer(step_model(dec), prompt),
        dec.gpus_per_replica,
    )
    first = trace.rate_per_bucket(60.0)[:3] or [0.0]
    per_decode = max(pair.decode.goodput_requests_per_second, 1e-9)
    d0 = max(1, o.min_replicas, math.ceil(max(first) / per_decode))
    p0 = max(1, math.ceil(d0 * pair.prefill_per_decode - 1e-9))
    return DisaggSetup(pair, prefill, decode, (p0, d0))


def _queue_wait_quantile(waits: list[float], quantile: float) -> float | None:
    if not waits:
        return None
    ordered = sorted(waits)
    return ordered[min(len(ordered) - 1, max(0, math.ceil(quantile * len(ordered)) - 1))]


def run_disaggregated(setup: Setup, d: DisaggSetup) -> RunResult:
    o, trace, pair = setup.options, setup.trace, d.pair
    prefill = Fleet(d.prefill, o.cold_start, o.seed, routing="load")
    decode = Fleet(d.decode, o.cold_start, o.seed + 1, routing="load")
    prefill.start(d.start[0], 0.0, warm=True)
    decode.start(d.start[1], 0.0, warm=True)
    policy = Tokenfleet(
        setup.spec, pair.decode.goodput_requests_per_second, d.start[1],
        period=float(setup.spec.autoscaling.interval_seconds),
    )  # fmt: skip
    originals = [FleetRequest(r.at, r.prompt, r.output, blocks=r.blocks) for r in trace.requests]
    prefills = [FleetRequest(r.arrival, r.prompt, 1, blocks=r.blocks) for r in originals]
    landed: dict[int, FleetRequest] = {}  # id(prefill request) -> its decode request
    of_prefill = {id(p): i for i, p in enumerate(prefills)}
    flights: list[tuple[float, int, FleetRequest]] = []  # (landing time, seq, decode request)
    p_window, d_window = observed.Window([], []), observed.Window([], [])
    arrivals: list[float] = []
    timeline: list[TimelinePoint] = []
    step = observed.SCRAPE_INTERVAL_S
    every = max(1, round(policy.period / step))
    p_plan, d_plan = pair.prefill.plan, pair.decode.plan
    quantile = o.quantile
    index, tick, seq = 0, 1, 0

    def land(now: float) -> None:
        while flights and flights[0][0] < now:
            _, _, request = heapq.heappop(flights)
            decode.route(request, request.arrival)

    def take_prefills(now: float) -> None:
        nonlocal seq
        first, done = prefill.events()
        p_window.first_tokens += [(r.first_token_at or now, r.ttft) for r in first]
        p_window.waits += [(r.first_token_at or now, r.queue_wait) for r in first]
        p_window.finishes += [(r.finished_at or now, 0.0) for r in done]
        for r in done:
            at = (r.finished_at or now) + transfer_seconds(
                r.prompt, p_plan.kv_bytes_per_token, d_plan.kv_bytes_per_token, pair.link
            )
            original = originals[of_prefill[id(r)]]
            request = FleetRequest(at, original.prompt, original.output)
            landed[of_prefill[id(r)]] = request
            heapq.heappush(flights, (at, seq, request))
            seq += 1

    while tick * step <= trace.duration:
        now = tick * step
        while index < len(prefills) and prefills[index].arrival < now:
            prefill.route(prefills[index], prefills[index].arrival)
            arrivals.append(prefills[index].arrival)
            index += 1
        prefill.advance(now)
        take_prefills(now)
        land(now)
        decode.advance(now)
        first, done = decode.events()
        d_window.first_tokens += [(r.first_token_at or now, r.ttft) for r in first]
        d_window.waits += [(r.first_token_at or now, r.queue_wait) for r in first]
        d_window.finishes += [(r.finished_at or now, r.tpot) for r in done]
        p_window.prune(now)
        d_window.prune(now)
        ready = decode.ready(now)
        signals = observed.signals(
            d_window, now, quantile=quantile, ttft_slo_s=o.ttft_ms / 1000,
            tpot_slo_s=o.tpot_ms / 1000,
            reporting=sum(1 for r in decode.replicas if r.ready_at <= now),
            running=[r.model.running for r in ready],
            waiting=[len(r.model.waiting) for r in ready],
            kv_usage=[r.model.kv_used / d.decode.config.kv_cache_tokens for r in ready],
        )  # fmt: skip
        recent = sum(1 for a in arrivals[-5000:] if a > now - observed.RATE_WINDOW_S)
        timeline.append(TimelinePoint(now, recent / observed.RATE_WINDOW_S,
                                      prefill.desired + decode.desired,
                                      len(ready) + len(prefill.ready(now)),
                                      signals.ttft_quantile_seconds))  # fmt: skip
        if tick % every == 0:
            current = FleetState(decode.desired, len(ready), o.min_replicas, setup.max_replicas)
            decode.scale_to(policy.decide(FleetView(now, current, signals, None, None)), now)
            rate = sum(1 for at, _ in p_window.finishes if at <= now) / observed.RATE_WINDOW_S
            wait = _queue_wait_quantile([w for at, w in p_window.waits if at <= now], quantile)
            pool = prefill_replicas(
                PrefillInputs(
                    current=prefill.desired,
                    decode=decode.desired,
                    request_rate=rate,
                    queue_wait_seconds=wait,
                    goodput_per_replica=pair.prefill.goodput_requests_per_second,
                    queue_wait_budget_seconds=pair.prefill.queue_wait_budget_ms / 1000,
                    band=pair.band,
                )
            )
            prefill.scale_to(pool.replicas, now)
        tick += 1
    for request in prefills[index:]:
        prefill.advance(request.arrival)
        prefill.route(request, request.arrival)
    prefill.finish(trace.duration)
    take_prefills(trace.duration)
    land(math.inf)
    decode.finish(trace.duration)
    good = 0
    ttft_good = 0
    missed: list[float] = []
    for i, original in enumerate(originals):
        landing = landed.get(i)
        ok_ttft = (
            landing is not None
            and landing.first_token_at is not None
            and landing.first_token_at - original.arrival <= o.ttft_ms / 1000
        )
        ok = (
            ok_ttft
            and landing is not None
            and landing.finished_at is not None
            and (landing.tpot <= o.tpot_ms / 1000)
        )
        ttft_good += ok_ttft
        good += ok
        if not ok:
            missed.append(original.arrival)
    return RunResult(
        name=PD_NAME,
        requests=len(originals),
        good=good,
        duration=trace.duration,
        gpu_hours=prefill.gpu_hours() + decode.gpu_hours(),
        scale_events=prefill.scale_events + decode.scale_events,
        timeline=timeline,
        autoscaler=policy,
        missed_at=tuple(missed),
        ttft_good=ttft_good,
    )


def describe(d: DisaggSetup) -> str:
    pair = d.pair
    return (
        f"disaggregated: {pair.label()}, band {pair.band[0]:.2f}-{pair.band[1]:.2f}; "
        f"prefill {pair.prefill.goodput_requests_per_second:.2f} req/s, decode "
        f"{pair.decode.goodput_requests_per_second:.2f} req/s per replica at the mean lengths; "
        f"KV {pair.transfer_ms:.1f} ms over {pair.link.label()}"
    )
