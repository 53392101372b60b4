"""Latency and throughput under load: the scheduler core run in virtual time over the step model.

plan() asks three questions of a sized replica, each answered by a short virtual run of
tokenfleet.scheduling (the same continuous-batching scheduler `tokenfleet sim` serves):
- closed loop at the target concurrency (`vllm bench serve --max-concurrency C`): TTFT
  p50/p95/p99, TPOT, ITL, output and total tokens/s;
- open loop at a request rate (`--request-rate R`, Poisson): the same, plus whether the
  replica keeps up;
- goodput capacity: the highest open-loop rate at which GOODPUT_ATTAINMENT of requests meet
  both SLOs (bisection over open-loop runs).

Cost: a run simulates at most MAX_SIMULATED running requests one by one. Above that, each
simulated request stands for `w` identical ones that move in lockstep (the step timer sees
w times the tokens, the scheduler a 1/w share of the KV cache, batch and token budget);
arrivals then come in groups of w, slightly burstier than Poisson. Runs are cached on their
inputs (the operator re-plans the same spec on every reconcile).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from functools import lru_cache
from typing import Literal, NamedTuple

from tokenfleet.capacity.engine_profiles import ENGINE_FACTS, engine_profile, modelled_kind
from tokenfleet.capacity.overheads import request_overhead_s
from tokenfleet.capacity.performance import StepModel
from tokenfleet.capacity.speculative import SpeculativeTimer
from tokenfleet.capacity.types import Plan, Prediction
from tokenfleet.scheduling.core import SchedulerConfig, StepTimer
from tokenfleet.scheduling.virtual import (
    LoadStats,
    benchmark_loop,
    closed_loop,
    offline,
    open_loop,
    poisson_benchmark,
)

# What a plan's load runs time steps with: the target's step model, or with speculative
# decoding its SpeculativeTimer (both frozen, so the runs below cache on them).
Timer = StepModel | SpeculativeTimer

# Running requests simulated individually (a run costs about linearly in it with the lazy
# scheduler: arrivals, prefills and finishes are the events). Lockstep groups
# prefill together, which stretches TTFT by up to w prefills: keep w = 1 at common loads.
MAX_SIMULATED = 64
CLOSED_MEASURED = 32  # requests counted after one warm-up wave (a steady closed loop)
OPEN_MEASURED = 64  # Poisson arrivals counted per open-loop run, after the warm-up ones
GOODPUT_ATTAINMENT = 0.95  # share of requests within SLO: spec.slo.quantile's default
BISECTION_STEPS = 4  # the first guess, then up to 3 halvings of its bracket ...
RESOLUTION = 0.12  # ... stopping once the capacity is known to within 12%
EXTRA_HALVINGS = 4  # then, if no rate passed yet, up to 4 more halvings (1/16 .. 1/128)
# Where the goodput search looks first, as a share of the saturation throughput, when the
# target concurrency meets the SLO: the capacity found was 0.82-1.0 of it on the bench's
# models (8B on H100, gpt-oss-120b, DeepSeek-V3; the bench test test_plan_latency.py).
GUESS_OF_SATURATION = 0.8
# The top of the goodput search, a rate it never runs: the saturation throughput itself.
# Past it an open loop keeps the scheduler as full as the closed loop with every slot busy
# and a queue grows, whatever a finite run shows: a run of OPEN_MEASURED requests shorter
# than one latency under load is all fill-up, no request finishing before the last arrival.
CEILING_OF_SATURATION = 1.0


@dataclass(frozen=True)
class ScaledTimer:
    """Each scheduled request stands for `w` identical ones."""

    inner: StepTimer
    w: int

    def step_seconds(
        self,
        prefill_tokens: int,
        decode_seqs: int,
        decode_context_tokens: int,
        prefill_attention_pairs: float | None = None,
    ) -> float:
        w = self.w
        pairs = prefill_tokens * prefill_tokens / 2
        if prefill_attention_pairs is not None:
            pairs = prefill_attention_pairs
        return self.inner.step_seconds(
            prefill_tokens * w, decode_seqs * w, decode_context_tokens * w, pairs * w
        )


@dataclass(frozen=True)
class Replica:
    """What the scheduler needs to know about a planned replica."""

    kv_cache_tokens: int
    max_num_seqs: int
    max_num_batched_tokens: int
    max_model_len: int
    block_size: int = 16  # vLLM's; SGLang pages by 1 token
    mixed_prefill: bool = True  # vLLM V1's; SGLang runs prefill batches apart (core.py)
    # Micro-batches in flight at once: pipeline parallelism keeps one per stage (vLLM V1's
    # batch queue, SGLang's PP micro-batches), each running the whole pipeline in turn.
    pipeline_lanes: int = 1
    engine: str = "vllm"  # whose client overhead applies (capacity/overheads.py)
    long_prefill_token_threshold: int = 0  # vLLM's per-step chunk cap (long_prefill.py)
    # The engine version's admission rules (engine_profiles.EngineProfile).
    prefix_caching: bool = False
    reserve_full_sequence: bool = False
    reserve_outputs: bool = False

    @classmethod
    def of(
        cls,
        engine: str,
        kv_cache_tokens: int,
        max_num_seqs: int,
        max_num_batched_tokens: int,
        max_model_len: int,
        pipeline_parallel_size: int = 1,
        version: str | None = None,
    ) -> Replica:
        kind = modelled_kind(engine)
        profile = engine_profile(kind, version)
        return cls(
            kv_cache_tokens,
            max_num_seqs,
            max_num_batched_tokens,
            max_model_len,
            block_size=profile.block_size,
            mixed_prefill=ENGINE_FACTS[kind].mixed_prefill,
            pipeline_lanes=max(1, pipeline_parallel_size),
            engine=kind,
            prefix_caching=profile.prefix_caching,
            reserve_full_sequence=profile.reserve_full_sequence,
            reserve_outputs=profile.reserve_outputs,
        )

    @classmethod
    def for_plan(cls, p: Plan) -> Replica:
        """The replica a plan renders: its KV cache, batch limits and engine version."""
        replica = cls.of(
            p.engine,
            p.kv_cache_tokens,
            p.max_num_seqs,
            p.max_num_batched_tokens,
            p.max_model_len,
            p.pipeline_parallel_size,
            p.engine_version,
        )
        return replace(replica, long_prefill_token_threshold=p.long_prefill_token_threshold)

    def scheduler_config(self) -> SchedulerConfig:
        """The scheduler as the engine version runs this replica: its limits, paging, batching
        and admission rules. `tokenfleet sim` and the fleet replay run it as is; lockstep()
        scales it. A request never outgrows the KV cache (SGLang caps it at its token pool;
        vLLM refuses to start otherwise)."""
        size, kv = self.block_size, self.kv_cache_tokens
        return SchedulerConfig(
            kv_cache_tokens=kv,
            max_num_seqs=self.max_num_seqs,
            max_num_batched_tokens=self.max_num_batched_tokens,
            max_model_len=min(self.max_model_len, kv // size * size),
            block_size=self.block_size,
            mixed_prefill=self.mixed_prefill,
            long_prefill_token_threshold=self.long_prefill_token_threshold,
            reserve_full_sequence=self.reserve_full_sequence,
            prefix_caching=self.prefix_caching,
            reserve_outputs=self.reserve_outputs,
        )

    def held(self, request_tokens: int) -> int:
        """How many requests of `request_tokens` run at once: the seats, or what the KV
        cache holds (beyond it the engine queues them: its admission checks the blocks)."""
        fit = self.kv_cache_tokens // max(request_tokens, 1)
        return max(1, min(self.max_num_seqs, fit))


def lockstep(
    replica: Replica, timer: StepTimer, running: int, request_tokens: int
) -> tuple[StepTimer, SchedulerConfig, int]:
    """The scheduler run that stands for the replica, and the factor its load and throughput
    scale by. Pipeline lanes are independent: each holds 1/lanes of the running requests,
    cache and batch, with a full token budget per micro-batch, and its steps take the whole
    pipeline's time (StepModel sums the stages), while the stages overlap across lanes.
    Within a lane, w lockstep copies stand for large loads."""
    need = max(2 * request_tokens, 1)
    lanes = max(1, min(replica.pipeline_lanes, running, replica.kv_cache_tokens // need))
    w = max(1, math.ceil(running / lanes / MAX_SIMULATED))
    # A 1/w share of the lane's cache must still hold a request; never scale past that.
    w = max(1, min(w, replica.kv_cache_tokens // lanes // need))
    kv = replica.kv_cache_tokens // (w * lanes)
    config = replace(
        replica.scheduler_config(),
        kv_cache_tokens=kv,
        max_num_seqs=max(1, replica.max_num_seqs // (w * lanes)),
        max_num_batched_tokens=max(1, replica.max_num_batched_tokens // w),
        max_model_len=min(replica.max_model_len, kv // replica.block_size * replica.block_size),
        # A 1/w copy caps its chunks at 1/w of the threshold, as it does its budget.
        long_prefill_token_threshold=-(-replica.long_prefill_token_threshold // w),
    )
    return (ScaledTimer(timer, w) if w > 1 else timer), config, w * lanes


def unscale(stats: LoadStats, w: int) -> LoadStats:
    if w == 1:
        return stats
    return replace(
        stats,
        requests_per_second=stats.requests_per_second * w,
        output_tokens_per_second=stats.output_tokens_per_second * w,
        total_tokens_per_second=stats.total_tokens_per_second * w,
    )


@lru_cache(maxsize=512)
def closed(
    timer: StepTimer,
    replica: Replica,
    concurrency: int,
    input_tokens: int,
    output_tokens: int,
    slo: tuple[float, float] | None = None,
    overhead_s: float | None = None,
) -> LoadStats:
    """Steady state of `concurrency` clients sending back to back. `overhead_s`: each
    request's time outside the engine (default: the engine's, capacity/overheads.py)."""
    c = max(1, min(concurrency, replica.max_num_seqs * 64))
    # The lockstep factor follows the requests that run at once, not the clients: beyond
    # what the replica holds the rest queue, and a queue costs a run next to nothing.
    running = min(c, replica.held(input_tokens + output_tokens))
    scaled, config, w = lockstep(replica, timer, running, input_tokens + output_tokens)
    clients = max(1, round(c / w))
    stats = closed_loop(
        config,
        scaled,
        clients,
        [(input_tokens, output_tokens)],
        closed_measured(clients),
        slo,
        request_overhead=_overhead(replica, input_tokens, overhead_s),
    )
    return unscale(stats, w)


Procedure = Literal["closed-loop", "burst", "poisson"]
PROCEDURES: tuple[Procedure, ...] = ("closed-loop", "burst", "poisson")
BENCHMARK_SEED = 7  # the Poisson benchmark's arrival times (virtual.poisson_times)


@lru_cache(maxsize=256)
def benchmark(
    timer: Timer,
    replica: Replica,
    procedure: Procedure,
    input_tokens: int,
    output_tokens: int,
    num_prompts: int,
    concurrency: int = 1,
    rate: float = 0.0,
    overhead_s: float | None = None,
) -> LoadStats:
    """A whole benchmark run as its client runs it, every request counted, the throughput
    over the makespan (what `vllm bench serve` prints):
    - "closed-loop": `concurrency` clients all sending at t = 0, each its next request when
      its last one ends, `num_prompts` in all (`--max-concurrency C --num-prompts N`);
    - "burst": all `num_prompts` at t = 0 (`--request-rate inf`);
    - "poisson": Poisson arrivals at `rate` req/s (`--request-rate R`, seeded).
    Large loads run in lockstep groups (lockstep()), sized by what runs at once."""
    shape = (input_tokens, output_tokens)
    n = max(1, num_prompts)
    held = replica.held(input_tokens + output_tokens)
    overhead = _overhead(replica, input_tokens, overhead_s)
    if procedure == "closed-loop":
        c = max(1, min(concurrency, n))
        scaled, config, w = lockstep(replica, timer, min(c, held), input_tokens + output_tokens)
        clients, prompts = max(1, round(c / w)), max(1, round(n / w))
        stats = benchmark_loop(
            config, scaled, clients, shape, num_prompts=prompts, request_overhead=overhead
        )
    elif procedure == "burst":
        scaled, config, w = lockstep(replica, timer, min(n, held), input_tokens + output_tokens)
        stats = offline(config, scaled, [shape], max(1, round(n / w)), request_overhead=overhead)
    else:
        if not rate > 0:
            raise ValueError("a Poisson benchmark needs a rate above 0")
        scaled, config, w = lockstep(replica, timer, held, input_tokens + output_tokens)
        prompts = max(1, round(n / w))
        stats = poisson_benchmark(
            config, scaled, rate / w, [shape], prompts, BENCHMARK_SEED, request_overhead=overhead
        )
    return unscale(stats, w)


def closed_measured(clients: int) -> int:
    """Requests closed() counts after its warm-up wave: at least CLOSED_MEASURED (a large
    loop is already steady after its first wave: half a wave more is enough for the
    means); a lone client's requests of one shape are identical one after another, so two
    give the same statistics as thirty-two."""
    return 2 if clients <= 1 else max(CLOSED_MEASURED, clients // 2)


def _overhead(replica: Replica, input_tokens: int, given: float | None) -> float:
    return request_overhead_s(replica.engine, input_tokens) if given is None else given


@lru_cache(maxsize=1024)
def open_(
    timer: Timer,
    replica: Replica,
    rate: float,
    input_tokens: int,
    output_tokens: int,
    slo: tuple[float, float] | None = None,
    in_flight: float = 1.0,
    decide: bool = False,
) -> LoadStats:
    """Poisson arrivals at `rate` requests/s; `in_flight` is the expected concurrency (it
    picks the lockstep factor). `decide`: the caller only asks whether the run meets the
    SLO (the goodput search): a failing run may stop sooner (open_loop's early_give_up),
    a passing one is the same run."""
    return open_run(
        timer,
        replica,
        rate,
        (input_tokens, output_tokens),
        OPEN_MEASURED,
        slo,
        in_flight,
        _overhead(replica, input_tokens, None),
        GOODPUT_ATTAINMENT if slo is not None else None,
        decide,
    )


def open_run(
    timer: StepTimer,
    replica: Replica,
    rate: float,
    request: tuple[int, int],
    measured: int,
    slo: tuple[float, float] | None,
    in_flight: float,
    overhead_s: float,
    give_up_below: float | None,
    early_give_up: bool,
) -> LoadStats:
    """Poisson arrivals at `rate` of one (prompt, output) `request`, `measured` of them
    counted, run in lockstep (`lockstep`) and scaled back. Warm-up: as many arrivals as the
    replica holds in flight, so counting starts at the steady state rather than in the
    fill-up."""
    scaled, config, w = lockstep(replica, timer, math.ceil(in_flight), sum(request))
    warmup = math.ceil(in_flight / w) + 8
    stats = open_loop(
        config,
        scaled,
        rate / w,
        [request],
        warmup + measured,
        slo,
        seed=7,
        warmup=warmup,
        request_overhead=overhead_s,
        give_up_below=give_up_below,
        early_give_up=early_give_up,
    )
    return unscale(stats, w)


@lru_cache(maxsize=512)
def goodput_capacity(
    timer: Timer,
    replica: Replica,
    input_tokens: int,
    output_tokens: int,
    ttft_slo_s: float,
    tpot_slo_s: float,
    ceiling_rps: float,
    guess_rps: float,
    one: LoadStats,
    probe_rps: float | None = None,
    floor_rps: float = 0.0,
) -> tuple[float, LoadStats | None]:
    """Highest open-loop rate (req/s) at which GOODPUT_ATTAINMENT of the requests meet both
    SLOs, and the run at that rate. `ceiling_rps`: a rate the replica cannot sustain (the top
    of the search); `guess_rps`: where to look first (the closed-loop rate at the target
    concurrency when that meets the SLO); `one`: a lone request's run (if even it misses the
    SLO, the capacity is 0 without a search); `probe_rps`: where to look next when the guess
    passes (default 1.6 x the guess); `floor_rps`: a rate below which the caller has no use
    for the capacity (cost_choice: the layout would cost more than two planned ones).

    The capacity returned is never above the bracket's top `hi` at any point of the search
    (lo only rises to rates below hi, hi only falls to rates above lo, and the halvings
    return hi / 2**k or 0), so once hi < floor_rps the search stops with (0.0, None): exact
    pruning, it never changes a capacity at or above the floor.

    Any later run at a rate below the floor is not run but taken as passing: were it to
    fail, hi would stay at or drop to its rate, below the floor, and the capacity with it.
    So when the search ends at or above the floor, every run below it must have passed for
    that to be the answer, and they are run then to check (one failing: (0.0, None)); when
    it ends below, so would the search that ran them (had that one ended at or above, they
    all passed, and it is this search). A layout that cannot beat the floor then skips the
    passing runs that climb towards it (test_goodput_floor.py checks both against the full
    search)."""
    slo = (ttft_slo_s, tpot_slo_s)
    if one.ttft_p50 > ttft_slo_s or one.tpot_p50 > tpot_slo_s:
        return 0.0, None
    assumed: list[float] = []  # rates below the floor, taken as passing

    def measure(rate: float) -> LoadStats:
        return _probe(timer, replica, input_tokens, output_tokens, slo, one, rate)

    def run(rate: float) -> LoadStats | None:
        if rate < floor_rps:
            assumed.append(rate)
            return None
        return measure(rate)

    def ok(stats: LoadStats | None) -> bool:
        return stats is None or _passes(stats)

    lo, hi, best, found = 0.0, ceiling_rps, None, False
    if hi < floor_rps:
        return 0.0, None
    guess = _first_rate(guess_rps, ceiling_rps)
    # The guess is run even below the floor: near the capacity, it fails there as often as
    # not, and a failure below the floor ends the search at once.
    stats: LoadStats | None = measure(guess)
    if ok(stats):
        up = guess * 1.6 if probe_rps is None or probe_rps <= guess else probe_rps
        lo, best, found, hi = guess, stats, True, min(ceiling_rps, up)
        probe = run(hi) if hi < ceiling_rps else None
        if hi < ceiling_rps and ok(probe):  # the guess was far too low: search the rest
            lo, best, hi = hi, probe, ceiling_rps
    else:
        hi = guess
    for _ in range(BISECTION_STEPS - 1):
        if hi < floor_rps:
            return 0.0, None
        if hi - lo <= RESOLUTION * hi:
            break
        mid = (lo + hi) / 2
        stats = run(mid)
        if ok(stats):
            lo, best, found = mid, stats, True
        else:
            hi = mid
    # A lone request meets the SLO, so some rate does: when the bracket's first guesses were
    # all too high (a closed loop that meets the SLO at the target concurrency can still be
    # far above the Poisson capacity: bursts), keep halving rather than report 0.
    for _ in range(EXTRA_HALVINGS if not found else 0):
        hi /= 2
        if hi < floor_rps:
            return 0.0, None
        stats = run(hi)
        if ok(stats):
            lo, best, found = hi, stats, True
            break
    if assumed and (lo < floor_rps or not all(ok(measure(rate)) for rate in assumed)):
        return 0.0, None
    return lo, best


def _probe(
    timer: Timer,
    replica: Replica,
    input_tokens: int,
    output_tokens: int,
    slo: tuple[float, float],
    one: LoadStats,
    rate: float,
) -> LoadStats:
    """One goodput-search run. Expected in flight, for the lockstep factor: Little's law at
    a lone request's latency, doubled for queueing near the capacity."""
    return open_(
        timer, replica, rate, input_tokens, output_tokens, slo, rate * one.e2e_mean * 2, True
    )


def _passes(stats: LoadStats) -> bool:
    return not stats.saturated and stats.attainment >= GOODPUT_ATTAINMENT


def _first_rate(guess_rps: float, ceiling_rps: float) -> float:
    return min(max(guess_rps, 0.05 * ceiling_rps), 0.9 * ceiling_rps)


class SearchStart(NamedTuple):
    """What predict_under_load starts the goodput search from."""

    at: LoadStats  # closed loop at the target concurrency
    one: LoadStats  # a lone request
    saturation: float  # closed-loop requests/s with every slot busy
    guess: float
    probe: float | None


def search_start(
    timer: Timer,
    replica: Replica,
    concurrency: int,
    input_tokens: int,
    output_tokens: int,
    slots: int,
    ttft_slo_s: float,
    tpot_slo_s: float,
) -> SearchStart:
    at = closed(timer, replica, concurrency, input_tokens, output_tokens)
    full = (
        at
        if slots <= concurrency
        else closed(timer, replica, max(slots, 1), input_tokens, output_tokens)
    )
    saturation = max(full.requests_per_second, at.requests_per_second)
    one = at if concurrency == 1 else closed(timer, replica, 1, input_tokens, output_tokens)
    meets = at.ttft_p95 <= ttft_slo_s and at.tpot_p95 <= tpot_slo_s
    guess = at.requests_per_second * (0.9 if meets else 0.5)
    probe = None
    if meets and GUESS_OF_SATURATION * saturation > guess:
        # Meeting the SLO at the target concurrency, the capacity is usually near the
        # saturation throughput: look just below it, then at it, rather than climbing from
        # the target's rate (each passing run on the way is a full one).
        guess, probe = GUESS_OF_SATURATION * saturation, saturation
    return SearchStart(at, one, saturation, guess, probe)


def first_probe_passes(
    timer: Timer,
    replica: Replica,
    input_tokens: int,
    output_tokens: int,
    ttft_slo_s: float,
    tpot_slo_s: float,
    start: SearchStart,
) -> bool:
    """Whether the goodput search's first run (the guess, which it runs whatever its floor
    unless the bracket's top is below it) passes: the same cached run. When it does, the
    capacity is at least the guess (the search's lo only rises): cost_choice plans such
    layouts first, so that they price the floor of the others."""
    one = start.one
    if one.ttft_p50 > ttft_slo_s or one.tpot_p50 > tpot_slo_s:
        return False
    slo = (ttft_slo_s, tpot_slo_s)
    rate = _first_rate(start.guess, start.saturation * CEILING_OF_SATURATION)
    return _passes(_probe(timer, replica, input_tokens, output_tokens, slo, one, rate))


def predict_under_load(
    timer: Timer,
    replica: Replica,
    concurrency: int,
    input_tokens: int,
    output_tokens: int,
    slots: int,
    gpus: int,
    price_per_gpu_hour: float,
    ttft_slo_s: float,
    tpot_slo_s: float,
    floor_rps: float = 0.0,
) -> Prediction:
    """plan()'s prediction for one replica: closed loop at the target concurrency, the
    saturation throughput (every slot busy) and the goodput capacity (0 when below
    `floor_rps`: goodput_capacity)."""
    start = search_start(
        timer, replica, concurrency, input_tokens, output_tokens, slots, ttft_slo_s, tpot_slo_s
    )
    at, saturation = start.at, start.saturation
    rate, good = goodput_capacity(
        timer,
        replica,
        input_tokens,
        output_tokens,
        ttft_slo_s,
        tpot_slo_s,
        saturation * CEILING_OF_SATURATION,
        start.guess,
        start.one,
        start.probe,
        floor_rps,
    )
    # A rate the replica sustains is below its saturation throughput by definition.
    saturation = max(saturation, rate)
    tokens_s = at.output_tokens_per_second
    cost = gpus * price_per_gpu_hour / (tokens_s * 3600) * 1e6 if tokens_s else math.inf
    return Prediction(
        ttft_ms=at.ttft_p50 * 1e3,
        tpot_ms=at.tpot_p50 * 1e3,
        output_tokens_per_second=tokens_s,
        requests_per_second=at.requests_per_second,
        goodput_requests_per_second=rate,
        goodput_concurrency=round(good.concurrency) if good else 0,
        cost_per_million_output_tokens=cost,
        concurrency=concurrency,
        ttft_p95_ms=at.ttft_p95 * 1e3,
        ttft_p99_ms=at.ttft_p99 * 1e3,
        itl_ms=at.itl_p50 * 1e3,
        total_tokens_per_second=at.total_tokens_per_second,
        goodput_ttft_p95_ms=good.ttft_p95 * 1e3 if good else 0.0,
        goodput_tpot_ms=good.tpot_p50 * 1e3 if good else 0.0,
        saturation_requests_per_second=saturation,
    )


def clear_caches() -> None:
    """Forget every cached run (benchmarks of a cold plan(), tests)."""
    for cached in (closed, open_, goodput_capacity, benchmark):
        cached.cache_clear()
