"""Load runs on the scheduler core in virtual time: what `vllm bench serve` would measure.

- closed loop: `concurrency` clients, each sending its next request when the last one ends
  (`--max-concurrency`), staggered at the start so the run reaches its steady state quickly;
  the first wave is warm-up and not counted.
- open loop: Poisson arrivals at `rate` requests/s (`--request-rate`), seeded, deterministic.

Both return percentiles of TTFT, TPOT and ITL and the throughput over the measured window.
Decode stretches between events are fast-forwarded (Scheduler.fast_forward), so a run of a
few hundred requests costs a few thousand scheduler steps, not hundreds of thousands; and
the runs step the LazyScheduler (scheduling/lazy.py), whose steps cost O(prefilling and
finishing requests) instead of O(running ones), with the same decisions, and which takes a
prompt's chunks cut by the token budget several at once (LazyScheduler.prefill_forward).
"""

from __future__ import annotations

import heapq
import math
import random
from collections.abc import Sequence
from dataclasses import dataclass, replace
from operator import itemgetter
from typing import cast

from tokenfleet.scheduling.core import Scheduler, SchedulerConfig, SimRequest, StepTimer
from tokenfleet.scheduling.lazy import LazyScheduler

Shape = tuple[int, int]  # (prompt tokens, output tokens)
# Every run stops after `max_steps` scheduler steps (or fast-forwards), whatever its input:
# plan() is bounded in time even for a pathological workload. A plan()-sized run takes a few
# thousand; the defaults below are two orders of magnitude above that.


@dataclass(frozen=True)
class LoadStats:
    """One load run, measured after warm-up. Times in seconds."""

    requests: int  # measured (finished) requests
    ttft_p50: float
    ttft_p95: float
    ttft_p99: float
    tpot_p50: float
    tpot_p95: float
    tpot_mean: float
    itl_p50: float
    e2e_mean: float
    requests_per_second: float
    output_tokens_per_second: float
    total_tokens_per_second: float
    attainment: float  # share of measured requests meeting both SLOs (1.0 without SLOs)
    saturated: bool  # open loop: the admission queue piled up (the rate is not sustained)
    preemptions: int
    ttft_mean: float = 0.0  # what benchmark clients report as "mean TTFT"

    @property
    def concurrency(self) -> float:
        """Mean requests in the system (Little's law)."""
        return self.requests_per_second * self.e2e_mean


def _quantile(sorted_values: Sequence[float], q: float) -> float:
    if not sorted_values:
        return math.inf
    index = min(len(sorted_values) - 1, max(0, math.ceil(q * len(sorted_values)) - 1))
    return sorted_values[index]


_first = itemgetter(0)


def _weighted_median(samples: list[tuple[float, float]]) -> float:
    if not samples:
        return 0.0
    # By value alone (a float key sorts faster than tuples): equal values return the same
    # value wherever the running weight crosses half among them.
    samples.sort(key=_first)
    half = sum(w for _, w in samples) / 2
    acc = 0.0
    for value, weight in samples:
        acc += weight
        if acc >= half:
            return value
    return samples[-1][0]


class _Run:
    """The event loop shared by both runs: arrivals in, steps (or fast-forwards) out."""

    def __init__(
        self,
        config: SchedulerConfig,
        timer: StepTimer,
        slo: tuple[float, float] | None,
        overhead: float = 0.0,
        exact: bool = False,
    ) -> None:
        # The lazy scheduler takes the same decisions at a fraction of the cost; `exact`
        # runs the eager one (tests compare the two).
        self.lazy = None if exact else LazyScheduler(config, timer)
        self.scheduler: Scheduler = (
            Scheduler(config, timer, record_token_times=False) if self.lazy is None else self.lazy
        )
        self.pending: list[tuple[float, int, SimRequest]] = []
        self.finished: list[SimRequest] = []
        self.itl: list[tuple[float, float]] = []  # (gap seconds, tokens that saw it)
        self.slo = slo
        self.overhead = overhead  # seconds a request spends outside the scheduler
        self.count = 0
        self.now = 0.0

    def arrive(self, at: float, shape: Shape) -> SimRequest:
        request = SimRequest(f"v{self.count}", shape[0], shape[1], at)
        heapq.heappush(self.pending, (at, self.count, request))
        self.count += 1
        return request

    def advance(self, max_steps: int) -> Sequence[SimRequest]:
        """One step (or a fast-forward) at the current time; returns requests that finished.
        Empty and idle with nothing pending means the run is over."""
        scheduler, pending, lazy = self.scheduler, self.pending, self.lazy
        now = self.now
        while pending and pending[0][0] <= now:
            scheduler.add(heapq.heappop(pending)[2])
        # The lazy scheduler fast-forwards only with no active (non-decoding) request, and
        # runs prefill chunks only with one: try just the one that can apply.
        if lazy is None or not lazy._active:
            jump = scheduler.fast_forward(now, pending[0][0] if pending else None)
            if jump is not None:
                self.itl.append(((jump.first_duration + jump.last_duration) / 2,
                                 jump.steps * jump.decode_seqs))  # fmt: skip
                self.now = jump.end
                return jump.finished
        else:
            chunks = lazy.prefill_forward(now)
            if chunks is not None:
                if chunks.decode_seqs:
                    self.itl.extend((d, chunks.decode_seqs) for d in chunks.durations)
                self.now = chunks.end
                return chunks.finished
        step = scheduler.schedule(now)
        if step is None:
            if pending:
                self.now = pending[0][0]
            return ()
        if step.decode_seqs:
            self.itl.append((step.duration, step.decode_seqs))
        if lazy is not None:
            self.now, _, finished = lazy.finish_step(step)
            return finished
        outcome = scheduler.complete(step)
        self.now = outcome.end
        return outcome.finished

    def meets_slo(self, r: SimRequest) -> bool:
        if self.slo is None:
            return True
        ttft_slo, tpot_slo = self.slo
        if r.first_token_at is None or r.last_token_at is None:
            return False
        if r.first_token_at - r.arrival + self.overhead > ttft_slo:
            return False
        n = r.output_tokens
        return n <= 1 or (r.last_token_at - r.first_token_at) / (n - 1) <= tpot_slo

    def stats(self, measured: list[SimRequest], window: float, saturated: bool) -> LoadStats:
        # A request reaches the scheduler `overhead` after it is sent (HTTP, tokeniser):
        # latencies the client sees start that much earlier.
        extra = self.overhead
        ttft = sorted(r.first_token_at - r.arrival + extra for r in measured)  # type: ignore[operator]
        tpots = sorted(
            (r.last_token_at - r.first_token_at) / (r.output_tokens - 1)  # type: ignore[operator]
            for r in measured
            if r.output_tokens > 1
        )
        e2e = [r.finished_at - r.arrival + extra for r in measured]  # type: ignore[operator]
        good = len([r for r in measured if self.meets_slo(r)])
        n = len(measured)
        rps = n / window if window > 0 else 0.0
        out = sum(r.output_tokens for r in measured) / max(n, 1)
        inp = sum(r.prompt_tokens for r in measured) / max(n, 1)
        return LoadStats(
            requests=n,
            ttft_p50=_quantile(ttft, 0.50),
            ttft_p95=_quantile(ttft, 0.95),
            ttft_p99=_quantile(ttft, 0.99),
            tpot_p50=_quantile(tpots, 0.50) if tpots else 0.0,
            tpot_p95=_quantile(tpots, 0.95) if tpots else 0.0,
            tpot_mean=sum(tpots) / len(tpots) if tpots else 0.0,
            itl_p50=_weighted_median(self.itl),
            e2e_mean=sum(e2e) / max(n, 1),
            requests_per_second=rps,
            output_tokens_per_second=rps * out,
            total_tokens_per_second=rps * (inp + out),
            attainment=good / max(n, 1),
            saturated=saturated,
            preemptions=self.scheduler.num_preemptions,
            ttft_mean=sum(ttft) / len(ttft) if ttft else 0.0,
        )


def closed_loop(
    config: SchedulerConfig,
    timer: StepTimer,
    concurrency: int,
    shapes: Sequence[Shape],
    measured: int,
    slo: tuple[float, float] | None = None,
    max_steps: int = 200_000,
    request_overhead: float = 0.0,
    exact: bool = False,
) -> LoadStats:
    """`concurrency` clients, back to back. The first `concurrency` requests to finish are
    warm-up; the next `measured` are counted."""
    run = _Run(config, timer, slo, request_overhead, exact)
    c = max(1, concurrency)
    for i, at in enumerate(closed_loop_starts(config, timer, c, shapes[0])):
        run.arrive(at, shapes[i % len(shapes)])
    # Count requests by the order they were sent, not by the order they finish (the first
    # to finish are the short ones), and keep every client busy until the last counted one
    # is done, so each counted request saw the full load.
    issued = c
    counted: list[SimRequest] = []
    to_count: set[int] = set()  # id() of the requests sent c-th to (c + measured - 1)-th
    pending_counted = measured
    steps = 0
    while pending_counted > 0 and steps < max_steps:
        steps += 1
        finished = run.advance(max_steps)
        for request in finished:
            if id(request) in to_count:
                counted.append(request)
                pending_counted -= 1
            sent = run.arrive(run.now + request_overhead, shapes[issued % len(shapes)])
            if issued < c + measured:
                to_count.add(id(sent))
            issued += 1
        if not finished and run.scheduler.idle and not run.pending:
            break
    # Little's law is exact for a closed loop without think time: X = clients / mean latency.
    # (A window count would depend on where the clients' phases fall.)
    if not counted:
        return run.stats([], 0.0, saturated=True)
    e2e = sum(cast(float, r.finished_at) - r.arrival for r in counted) / len(counted)
    return run.stats(counted, len(counted) * (e2e + request_overhead) / c, saturated=False)


def closed_loop_starts(
    config: SchedulerConfig, timer: StepTimer, clients: int, shape: Shape
) -> list[float]:
    """When closed_loop's clients send their first requests: staggered over one request's
    estimated latency, so finishes spread out as in a long benchmark instead of one
    synchronised wave. The estimate runs as many requests at once as the replica holds (the
    seats, or the KV cache at this shape): beyond that the others queue."""
    c = max(1, clients)
    prompt, out = shape
    held = min(c, config.max_num_seqs, max(1, config.kv_cache_tokens // max(prompt + out, 1)))
    context = held * (prompt + out // 2)
    e2e = timer.step_seconds(prompt, 0, 0) + out * timer.step_seconds(0, held, context)
    gap = e2e / c
    return [i * gap for i in range(c)]


def poisson_times(rate: float, requests: int, seed: int) -> list[float]:
    """open_loop's arrival times: the first at 0, then exponential gaps at `rate`."""
    rng = random.Random(seed)
    at = 0.0
    times: list[float] = []
    for _ in range(requests):
        times.append(at)
        at += rng.expovariate(rate)
    return times


def first_wave(
    config: SchedulerConfig,
    timer: StepTimer,
    concurrency: int,
    shape: Shape,
    max_steps: int = 200_000,
    request_overhead: float = 0.0,
) -> LoadStats:
    """The first wave of a closed-loop benchmark as its client runs it (`aiperf --concurrency
    C`, `vllm bench serve --max-concurrency C`): every client sends at t = 0, so the wave
    queues behind each other's prefill. With vLLM's mixed steps the clients' finishing times
    then drift apart (the H100 silicon rows show it), so closed_loop's staggered start and
    discarded warm-up give the later waves; SGLang's separate prefill batches keep the waves
    together (benchmark_loop runs them all; calibration/silicon_bench.py picks)."""
    run = _Run(config, timer, None, request_overhead)
    c = max(1, concurrency)
    sent = [run.arrive(0.0, shape) for _ in range(c)]
    steps = 0
    while (run.pending or not run.scheduler.idle) and steps < max_steps:
        steps += 1
        run.advance(max_steps)
    done = [r for r in sent if r.finished]
    if not done:
        return run.stats([], 0.0, saturated=True)
    makespan = max(cast(float, r.finished_at) for r in done) + request_overhead
    return run.stats(done, makespan, saturated=len(done) < c)


def benchmark_loop(
    config: SchedulerConfig,
    timer: StepTimer,
    concurrency: int,
    shape: Shape,
    rounds: int = 1,
    max_steps: int = 200_000,
    request_overhead: float = 0.0,
    num_prompts: int | None = None,
) -> LoadStats:
    """A whole closed-loop benchmark (`vllm bench serve --max-concurrency C --num-prompts
    N`): every client sends at t = 0, then its next request `request_overhead` after its
    last one ends, N requests in all (default `rounds` x C), every one counted; the
    throughput is over the makespan."""
    run = _Run(config, timer, None, request_overhead)
    c = max(1, concurrency)
    total = max(1, num_prompts) if num_prompts is not None else c * max(1, rounds)
    sent = [run.arrive(0.0, shape) for _ in range(min(c, total))]
    steps = 0
    while len(sent) < total or run.pending or not run.scheduler.idle:
        steps += 1
        if steps > max_steps:
            break
        for _ in run.advance(max_steps):
            if len(sent) < total:
                sent.append(run.arrive(run.now + request_overhead, shape))
    done = [r for r in sent if r.finished]
    if not done:
        return run.stats([], 0.0, saturated=True)
    makespan = max(cast(float, r.finished_at) for r in done) + request_overhead
    return run.stats(done, makespan, saturated=len(done) < total)


def mean_of_rounds(first: float, later: float, rounds: int) -> float:
    """A benchmark's mean over `rounds` waves whose first (first_wave) differs from the rest
    (closed_loop)."""
    rounds = max(rounds, 1)
    return (first + (rounds - 1) * later) / rounds


def _waits(requests: Sequence[SimRequest]) -> list[float]:
    """Admission waits (first scheduled minus arrival); every request must be scheduled."""
    return [cast(float, r.scheduled_at) - r.arrival for r in requests]


# The verdict compares the first and the last 1/PILE_UP_PARTS of the measured requests.
PILE_UP_PARTS = 4


def _piled_up(measured: Sequence[SimRequest]) -> bool:
    """Not sustained: the admission queue never empties back to where it was. Every one of
    the last quarter's requests waited longer to be scheduled than any of the first
    quarter's. An engine that keeps up empties its queue again and again (its waits rise
    while a burst or a batch of prompts is taken in, and fall back); past what it sustains
    (slots, KV cache or token budget full) a queue builds at (rate - admissions) x time
    and the waits' floor rises with it. For waits that only fluctuate, every one of n
    ordered after every one of another n has odds 1 in C(2n, n) (n = 16: 1 in 6e8); the
    waits of neighbours are correlated (a burst lifts several), but a burst that covers a
    whole quarter and outlasts the first one's is a queue that did not empty.

    The number of requests in the system is no verdict: it also grows while a sustained
    run fills up (a run shorter than one latency under load is all fill-up, no request
    finishing before the last arrival), and lockstep batch completions make it jump far
    more than Poisson noise. Nor is a least-squares slope of the waits: the rise and fall
    of one burst at the end of the window makes it "significant" against the standard
    error of independent waits."""
    n = len(measured) // PILE_UP_PARTS
    if n < 1:
        return False
    return min(_waits(measured[-n:])) > max(_waits(measured[:n]))


def open_loop(
    config: SchedulerConfig,
    timer: StepTimer,
    rate: float,
    shapes: Sequence[Shape],
    requests: int,
    slo: tuple[float, float] | None = None,
    seed: int = 0,
    max_steps: int = 200_000,
    warmup: int | None = None,
    request_overhead: float = 0.0,
    give_up_below: float | None = None,
    exact: bool = False,
    early_give_up: bool = False,
) -> LoadStats:
    """Poisson arrivals at `rate` req/s. The first `warmup` requests (default 20%) fill the
    replica and are not counted: give at least the expected number in flight (rate x
    latency). `saturated` when the rate outruns the replica: its admission queue piles up
    over the measured window (_piled_up). A run shorter than one latency under load cannot
    show every overload: while the batch still grows, nothing queues (the caller bounds the
    rate by the closed loop with every slot busy: capacity/load.py). With an `slo` and
    `give_up_below`, the run stops as soon as so many measured requests missed the SLO that
    the attainment cannot reach it (the returned attainment is then an upper bound below the
    target). `early_give_up` counts a request as missing as soon as its TTFT is known to be
    over the SLO (its first token late, or not yet come that late), not when it finishes: a
    run that gives up then stops sooner with other statistics (for a caller that only asks
    whether it passed); a run that does not give up is the same (every request so counted
    misses at its finish). It also stops, saturated, once every measured request is
    scheduled with a queue that piled up (the verdict looks only at their admission waits),
    skipping the drain."""
    run = _Run(config, timer, slo, request_overhead, exact)
    arrivals = [
        run.arrive(at, shapes[i % len(shapes)])
        for i, at in enumerate(poisson_times(rate, requests, seed))
    ]
    warm = requests // 5 if warmup is None else min(warmup, requests - 1)
    counted = requests - warm
    allowed = math.inf
    if slo is not None and give_up_below is not None:
        # float(): compiled (mypyc), a variable typed float holds only floats
        allowed = float(math.floor((1 - give_up_below) * counted))
    measured_from = {id(r) for r in arrivals[warm:]}
    bad = 0
    late: set[int] = set()  # measured, counted bad for their TTFT before they finished
    scan = warm if early_give_up and allowed < math.inf and slo is not None else requests
    ttft_slo = slo[0] if slo is not None else math.inf
    last_arrival = arrivals[-1].arrival
    judged = False  # the early saturation verdict (decider only) was taken
    admitted = warm  # measured requests before it are all scheduled
    steps = 0
    while (run.pending or not run.scheduler.idle) and steps < max_steps:
        steps += 1
        for request in run.advance(max_steps):
            if id(request) in measured_from and id(request) not in late:
                bad += not run.meets_slo(request)
        # Requests get their first tokens about in arrival order: walk them so, stopping
        # at the first that may still be on time.
        # meets_slo's own arithmetic: a first token still to come comes after run.now.
        while scan < requests:
            request = arrivals[scan]
            token_at = request.first_token_at
            if token_at is None:
                if not run.now - request.arrival + request_overhead > ttft_slo:
                    break
            elif request.finished or not (token_at - request.arrival + request_overhead > ttft_slo):
                scan += 1
                continue
            late.add(id(request))  # its first token comes (or came) too late
            bad += 1
            scan += 1
        if bad > allowed:
            done = [r for r in arrivals[warm:] if r.finished]
            stats = run.stats(done, max(run.now - arrivals[warm].arrival, 1e-9), False)
            return replace(stats, attainment=1 - bad / counted)
        if early_give_up and not judged and not run.pending:
            # Once every measured request is scheduled, the verdict (their admission waits)
            # is settled; a run whose queue piled up fails whatever the drain does, and a
            # decider needs no more. Admission is about in arrival order: walk a pointer.
            while admitted < requests and arrivals[admitted].scheduled_at is not None:
                admitted += 1
            if admitted == requests:
                judged = True
                if _piled_up(arrivals[warm:]):
                    done = [r for r in arrivals[warm:] if r.finished]
                    return run.stats(done, max(run.now - arrivals[warm].arrival, 1e-9), True)
    measured = [r for r in arrivals[warm:] if r.finished]
    if not measured:
        return run.stats([], 0.0, saturated=True)
    first = arrivals[warm].arrival
    window = last_arrival - first
    saturated = len(measured) < len(arrivals) - warm or _piled_up(arrivals[warm:])
    stats = run.stats(measured, window if window > 0 else 1.0, saturated)
    if not saturated:
        # A sustained open loop serves what is offered; the sample's own count over the
        # window is the offered rate plus Poisson noise.
        out = stats.output_tokens_per_second / max(stats.requests_per_second, 1e-12)
        total = stats.total_tokens_per_second / max(stats.requests_per_second, 1e-12)
        stats = replace(
            stats,
            requests_per_second=rate,
            output_tokens_per_second=rate * out,
            total_tokens_per_second=rate * total,
        )
    return stats


def poisson_benchmark(
    config: SchedulerConfig,
    timer: StepTimer,
    rate: float,
    shapes: Sequence[Shape],
    requests: int,
    seed: int = 0,
    max_steps: int = 400_000,
    request_overhead: float = 0.0,
) -> LoadStats:
    """`vllm bench serve --request-rate R --num-prompts N`: Poisson arrivals (poisson_times),
    every request counted, the throughput over the makespan (the last finish), as the
    benchmark reports it; `saturated` when the admission queue piled up (_piled_up)."""
    run = _Run(config, timer, None, request_overhead)
    arrivals = [
        run.arrive(at, shapes[i % len(shapes)])
        for i, at in enumerate(poisson_times(rate, requests, seed))
    ]
    steps = 0
    while (run.pending or not run.scheduler.idle) and steps < max_steps:
        steps += 1
        run.advance(max_steps)
    done = [r for r in arrivals if r.finished]
    makespan = max((r.finished_at or 0.0) for r in done) + request_overhead if done else 0.0
    saturated = len(done) < len(arrivals) or _piled_up(arrivals)
    return run.stats(done, makespan, saturated)


def offline(
    config: SchedulerConfig,
    timer: StepTimer,
    shapes: Sequence[Shape],
    requests: int,
    max_steps: int = 400_000,
    request_overhead: float = 0.0,
    exact: bool = False,
) -> LoadStats:
    """Every request sent at once (`--request-rate inf`, offline throughput): tokens over
    the makespan. TTFT here is queueing, as the benchmarks that run it say."""
    run = _Run(config, timer, None, request_overhead, exact)
    arrivals = [run.arrive(0.0, shapes[i % len(shapes)]) for i in range(requests)]
    steps = 0
    while (run.pending or not run.scheduler.idle) and steps < max_steps:
        steps += 1
        run.advance(max_steps)
    done = [r for r in arrivals if r.finished]
    makespan = max((r.finished_at or 0.0) for r in done) if done else 0.0
    return run.stats(done, makespan, saturated=len(done) < len(arrivals))
