"""A benchmark run predicted the way its client runs it: `plan --benchmark`, `tokenfleet
bench --gpu`, and `calibrate --perf --silicon` share this one procedure.

plan()'s default prediction is a closed loop in its steady state (capacity/load.py closed:
clients staggered, the first wave not counted). A benchmark a user runs is not that:
- closed loop (`vllm bench serve --max-concurrency C --num-prompts N`, `aiperf
  --concurrency C`): every client sends at t = 0, then its next request when its last one
  ends, N requests in all, every one counted. What follows the first wave depends on the
  schedule (calibration/silicon_bench.py has the evidence):
  - SGLang's default (prefill batches the decodes wait for): a wave is prefilled together,
    decodes together and comes back together, so every round stays a burst: the whole
    loop is simulated (scheduling/virtual.py benchmark_loop; a few rounds give the mean of
    many);
  - a mixed schedule (vLLM V1; SGLang with --enable-mixed-chunk): the first wave queues
    behind each other's prefill (virtual.first_wave), then the waves drift apart and the
    rounds run as the steady loop (load.closed). The mean weighs the first wave by
    1 / burst_rounds (capacity/overheads.py, fitted on H100 rows: the clients' requests
    come back bunched for a few rounds before they spread) or by 1 / rounds when the run
    is shorter. A deterministic loop would keep the waves in step for good: on the H100
    rows it predicts vLLM's mean TTFT 120% too slow.
  Reported: means (the client's "Mean TTFT / TPOT") and the output throughput.
- burst (`--request-rate inf`): N requests at t = 0 (load.benchmark "burst");
- Poisson (`--request-rate R`): N requests at seeded Poisson times (load.benchmark
  "poisson").
Every latency includes the client's time outside the engine (capacity/overheads.py).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from tokenfleet.capacity import load
from tokenfleet.capacity.load import Procedure, Replica
from tokenfleet.capacity.overheads import mixed_burst_rounds, request_overhead_s
from tokenfleet.capacity.performance import StepModel
from tokenfleet.capacity.types import Plan
from tokenfleet.scheduling.virtual import benchmark_loop, first_wave, mean_of_rounds

SYNCHRONISED_ROUNDS = 4  # SGLang's waves repeat: a few rounds give the mean of twenty


@dataclass(frozen=True)
class Simulated:
    ttft_s: float  # the client's mean, its overhead included
    tpot_s: float
    requests_per_second: float = 0.0


@dataclass(frozen=True)
class Phases:
    """A mixed schedule's closed-loop benchmark in two parts: the start burst and the steady
    loop."""

    first: Simulated
    later: Simulated

    def mean(self, burst_rounds: int) -> Simulated:
        return Simulated(
            mean_of_rounds(self.first.ttft_s, self.later.ttft_s, burst_rounds),
            mean_of_rounds(self.first.tpot_s, self.later.tpot_s, burst_rounds),
        )


def closed_loop_phases(
    timer: StepModel,
    replica: Replica,
    concurrency: int,
    first_shape: tuple[int, int],
    later_shape: tuple[int, int],
    overhead_s: float,
    rounds: int,
) -> Simulated | Phases:
    """The closed-loop benchmark of `concurrency` clients and `rounds` x C requests: SGLang's
    whole loop, or a mixed schedule's two phases (the module docstring). `first_shape`: the
    first wave's requests (prompt tokens to compute, output tokens), `later_shape`: the
    others' (they differ when a prefix cache serves part of later prompts)."""
    c = max(1, concurrency)
    prompt, output = first_shape
    scaled, config, w = load.lockstep(replica, timer, c, prompt + output)
    clients = max(1, round(c / w))
    if not replica.mixed_prefill:
        waves = min(rounds, SYNCHRONISED_ROUNDS)
        loop = benchmark_loop(
            config, scaled, clients, first_shape, waves, request_overhead=overhead_s
        )
        return Simulated(loop.ttft_mean, loop.tpot_mean, loop.requests_per_second * w)
    first = first_wave(config, scaled, clients, first_shape, request_overhead=overhead_s)
    later = load.closed(timer, replica, c, *later_shape, overhead_s=overhead_s)
    return Phases(
        Simulated(first.ttft_mean, first.tpot_mean, first.requests_per_second * w),
        Simulated(later.ttft_mean, later.tpot_mean, later.requests_per_second),
    )


@dataclass(frozen=True)
class BenchmarkRun:
    """What the benchmark's client would print, predicted. Times in seconds."""

    procedure: Procedure
    num_prompts: int
    concurrency: int | None  # closed loop
    request_rate: float | None  # Poisson
    ttft_mean_s: float
    tpot_mean_s: float
    output_tokens_per_second: float
    requests_per_second: float
    # The exact procedures (burst, Poisson, SGLang's loop) also give medians and a p99.
    ttft_p50_s: float | None = None
    ttft_p99_s: float | None = None
    tpot_p50_s: float | None = None

    @property
    def command(self) -> str:
        """The `vllm bench serve` / `tokenfleet bench` flags of this procedure."""
        if self.procedure == "closed-loop":
            return f"--max-concurrency {self.concurrency} --num-prompts {self.num_prompts}"
        if self.procedure == "burst":
            return f"--request-rate inf --num-prompts {self.num_prompts}"
        return f"--request-rate {self.request_rate:g} --num-prompts {self.num_prompts}"


def predict(
    timer: StepModel,
    replica: Replica,
    procedure: Procedure,
    input_tokens: int,
    output_tokens: int,
    num_prompts: int,
    concurrency: int | None = None,
    request_rate: float | None = None,
) -> BenchmarkRun:
    """The benchmark `procedure` on `replica` (module docstring)."""
    n = max(1, num_prompts)
    overhead = request_overhead_s(replica.engine, input_tokens)
    if procedure == "closed-loop":
        c = max(1, min(concurrency or 1, n))
        rounds = max(1, round(n / c))
        shape = (input_tokens, output_tokens)
        run = closed_loop_phases(timer, replica, c, shape, shape, overhead, rounds)
        if isinstance(run, Phases):
            mean = run.mean(min(mixed_burst_rounds(), rounds))
            duration = c / max(run.first.requests_per_second, 1e-12)
            duration += max(0, n - c) / max(run.later.requests_per_second, 1e-12)
            rps = n / duration
            return BenchmarkRun(procedure, n, c, None, mean.ttft_s, mean.tpot_s,
                                rps * output_tokens, rps)  # fmt: skip
        rps = run.requests_per_second
        return BenchmarkRun(procedure, n, c, None, run.ttft_s, run.tpot_s, rps * output_tokens, rps)
    if procedure == "poisson" and not (request_rate is not None and request_rate > 0):
        raise ValueError("a Poisson benchmark needs a request rate above 0")
    s = load.benchmark(timer, replica, procedure, input_tokens, output_tokens, n,
                       rate=request_rate or 0.0, overhead_s=overhead)  # fmt: skip
    return BenchmarkRun(
        procedure,
        n,
        None,
        request_rate if procedure == "poisson" else None,
        s.ttft_mean,
        s.tpot_mean,
        s.output_tokens_per_second,
        s.requests_per_second,
        s.ttft_p50,
        s.ttft_p99,
        s.tpot_p50,
    )


def predict_for_plan(
    p: Plan,
    procedure: Procedure,
    num_prompts: int,
    concurrency: int | None = None,
    request_rate: float | None = None,
    input_tokens: int | None = None,
    output_tokens: int | None = None,
) -> BenchmarkRun:
    """predict() on a planned replica, at the plan's request shape unless told."""
    from tokenfleet.capacity import step_model  # the package imports this module's callers

    req = p.request
    assert req is not None
    prompt = input_tokens if input_tokens is not None else req.input_tokens
    output = output_tokens if output_tokens is not None else req.output_tokens
    c = concurrency if concurrency is not None else req.concurrency
    rate = request_rate if request_rate is not None and math.isfinite(request_rate) else None
    return predict(step_model(p), Replica.for_plan(p), procedure, prompt, output,
                   num_prompts, c, rate)  # fmt: skip
