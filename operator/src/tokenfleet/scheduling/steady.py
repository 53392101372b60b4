"""The throughput of a closed loop in its steady state, from a handful of step times.

closed_loop (virtual.py) simulates every step of `clients` clients sending one request shape
back to back. With every slot busy (plan()'s saturation throughput) that is the costliest
run of a plan, and its answer is a mean over a steady state: this module solves that state
as a fixed point instead of simulating it.

In the steady state the requests come back at X per second and every decoding request
gains one token per cycle of mean length C, so (Little's law)
- d = X (O - 1) C requests decode in each cycle, their contexts averaging I + O / 2 tokens;
- a = X C prompts arrive per cycle, a I prompt tokens to compute;
- each request spends E = W + P + (O - 1) C in the engine (W: the rest of the step running
  when it arrives, P: the step(s) that compute its prompt and sample its first token) and
  `overhead` outside it, so X = clients / (E + overhead);
- the prompt tokens cannot exceed the cycles' token budget: X <= budget / (I C).

A cycle is one step on vLLM (prompt chunks share the step with the decodes, after them in
the token budget) and, on SGLang's default schedule, a decode step plus the prefill batches
the decodes wait for. The prompt tokens of a cycle are whole prompts (or chunks, when a
prompt exceeds the budget), so cycles carry either the fewer or the more of the two counts
around their mean: the step times are those of the two compositions, weighted to the mean,
not the step time of a mean composition (a step is memory-bound until its tokens make it
compute-bound). On SGLang, prompts that fit one batch come back in cohorts instead (those
prefilled together finish together), and a prefill batch of two prompts costs far less
than two of one (the weights, on an MoE model nearly every expert, are read once per
batch): the cycle is the mean over the count of cohorts in it (_cohorts). The right-hand
side falls as X rises, so the fixed point is unique; it is found by regula falsi.

What it leaves out: preemption, long_prefill_token_threshold, and how far a deterministic
loop's cohorts merge beyond the first pass (on SGLang with short requests the clients fall
into step, and the estimate falls short of the simulated loop by up to 27%). Its
unit tests compare it with closed_loop; the planning benchmarks measure it on plan()'s
every-slot-busy runs, and the sensitivity of plan()'s choices to the saturation value,
which keeps plan() on the simulated run.
"""

from __future__ import annotations

import math
from typing import NamedTuple

from tokenfleet.scheduling.core import SchedulerConfig, StepTimer

TOLERANCE = 1e-6  # the clients held at the answer, relative to the clients given
ITERATIONS = 100  # a bound only: regula falsi on this smooth curve takes about ten


MASS = 1e-9  # the probability left out of a cycle's cohort count distribution


class _Cycle(NamedTuple):
    mean: float  # C: mean seconds between two tokens of a decoding request
    prefill_step: float  # the step that computes a prompt's (last) piece


def _cycle(
    config: SchedulerConfig, timer: StepTimer, arrivals: float, prompt: int, output: int
) -> _Cycle:
    """The cycle with `arrivals` prompts arriving per cycle, on average."""
    decoding = arrivals * (output - 1)
    d = round(decoding)
    context = round(decoding * (prompt + output / 2))
    budget = config.max_num_batched_tokens
    if not config.mixed_prefill and prompt <= budget:
        return _prefill_batches(config, timer, arrivals, prompt, d, context)
    tokens = arrivals * prompt  # prompt tokens per cycle, mean
    # Attention work per prompt token: a prompt's pieces sum to prompt**2 / 2 pairs.
    half = prompt / 2
    if config.mixed_prefill:
        room = max(budget - d, 1)  # the decodes come first in a step's budget
        piece = min(prompt, room)  # a cycle's prompt tokens come in whole pieces
        fewer = min(int(tokens // piece) * piece, room)
        more = min(fewer + piece, room)

        def step(p: int) -> float:
            return timer.step_seconds(p, d, context, p * half) if p or d else 0.0

    else:
        # A prompt longer than the budget chains its prefill batches, and the prompts that
        # arrive meanwhile join the chain (no decode step runs until no prompt waits): the
        # cycle's prompt tokens flow through full batches, spread evenly over the cycles.
        fewer = int(tokens // budget) * budget
        more = fewer + budget
        decode = timer.step_seconds(0, d, context) if d else 0.0

        def step(p: int) -> float:
            return decode + _prefill_seconds(timer, p, budget, half)

    low, high = step(fewer), step(more)
    share = (tokens - fewer) / (more - fewer) if more > fewer else 0.0
    share = min(max(share, 0.0), 1.0)
    return _Cycle(low + share * (high - low), high)


def _prefill_seconds(timer: StepTimer, tokens: int, budget: int, half: float) -> float:
    """SGLang's prefill batches of at most `budget` tokens, run until no prompt waits."""
    full, rest = divmod(tokens, budget)
    batches = full * timer.step_seconds(budget, 0, 0, budget * half) if full else 0.0
    return batches + (timer.step_seconds(rest, 0, 0, rest * half) if rest else 0.0)


def _cohorts(arrivals: float) -> tuple[list[float], float]:
    """(P(m cohorts in one SGLang cycle), m = 0, 1, ...; the prompts of a cohort, mean).
    The clients' second requests (the measured ones) come back in cohorts, each the batch
    their first requests were prefilled in (those prefill together, decode together and
    finish in the same step); the first requests' arrivals, independent of the cycle's
    phase, are Poisson per cycle. So the cohorts are the first pass's non-empty batches:
    Poisson(1 - e^-arrivals) per cycle, of zero-truncated Poisson(arrivals) size."""
    cohorts = -math.expm1(-arrivals)  # at most one per cycle on average
    counts = [math.exp(-cohorts)]
    while sum(counts) < 1 - MASS:
        counts.append(counts[-1] * cohorts / len(counts))
    return counts, arrivals / cohorts


def _prefill_batches(
    config: SchedulerConfig,
    timer: StepTimer,
    arrivals: float,
    prompt: int,
    d: int,
    context: int,
) -> _Cycle:
    """SGLang's cycle: a decode step plus prefill batches of at most `budget` tokens until
    no prompt waits. A prefill batch's step time is far from proportional to its prompts
    (the first prompt loads the weights, and on an MoE model nearly every expert), so the
    cycle is the mean over the count of cohorts in it; the prompts of m cohorts are taken
    as the two compositions around their mean, like a vLLM cycle's."""
    budget = config.max_num_batched_tokens
    half = prompt / 2  # attention work per prompt token: a prompt sums prompt**2 / 2 pairs
    decode = timer.step_seconds(0, d, context) if d else 0.0

    def step(prompts: int) -> float:
        return decode + _prefill_seconds(timer, prompts * prompt, budget, half)

    if arrivals <= 0:
        return _Cycle(decode, step(1))
    counts, size = _cohorts(arrivals)
    mean = biased = 0.0
    for m, p in enumerate(counts):
        prompts = m * size
        fewer = int(prompts)
        share = prompts - fewer
        seconds = step(fewer) + (share * (step(fewer + 1) - step(fewer)) if share else 0.0)
        mean += p * seconds
        biased += prompts * p * seconds  # the cycle a given prompt is prefilled in
    return _Cycle(mean, biased / arrivals)


def closed_loop_rate(
    config: SchedulerConfig,
    timer: StepTimer,
    clients: int,
    prompt: int,
    output: int,
    overhead: float = 0.0,
) -> float:
    """Requests per second of `clients` clients sending (prompt, output) requests back to
    back, each `overhead` seconds outside the engine between two: closed_loop's
    requests_per_second, from the steady state rather than a simulation."""
    n = max(1, clients)
    prompt = max(1, prompt)
    output = max(1, output)
    budget = config.max_num_batched_tokens
    pieces = -(-prompt // budget)  # the steps (or cycles) one prompt spans, at least

    def clients_for(arrivals: float) -> tuple[float, float]:
        """(the clients a steady state with `arrivals` prompts per cycle holds, its X)."""
        cycle = _cycle(config, timer, arrivals, prompt, output)
        if cycle.mean <= 0:
            return 0.0, 0.0
        rate = arrivals / cycle.mean
        engine = cycle.mean / 2 + pieces * cycle.prefill_step + (output - 1) * cycle.mean
        return rate * (engine + overhead), rate

    # Prompts per cycle: at most every client's, and no more decodes than seats; vLLM's
    # prompt tokens and decodes share one step's budget.
    top = float(n)
    if output > 1:
        top = min(top, config.max_num_seqs / (output - 1))
    if config.mixed_prefill:
        top = min(top, budget / (prompt + output - 1))
    held, rate = clients_for(top)
    if held <= n:
        return rate  # a queue forms: the budget (or the seats) set the throughput
    # clients_for rises with the arrivals per cycle: regula falsi (Illinois) for the
    # arrivals that hold n clients, from the bracket [0, top].
    lo, f_lo, hi, f_hi = 0.0, -float(n), top, held - n
    side = 0
    for _ in range(ITERATIONS):
        mid = (lo * f_hi - hi * f_lo) / (f_hi - f_lo)
        held, rate = clients_for(mid)
        f_mid = held - n
        if abs(f_mid) <= TOLERANCE * n or hi - lo <= TOLERANCE * hi:
            return rate
        if f_mid < 0:
            lo, f_lo = mid, f_mid
            if side == -1:
                f_hi /= 2
            side = -1
        else:
            hi, f_hi = mid, f_mid
            if side == 1:
                f_lo /= 2
            side = 1
    return clients_for((lo + hi) / 2)[1]
