"""The two roles of disaggregated serving under load: the scheduler core in virtual time. Pure.

A prefill replica runs each request to its first token (vLLM's P/D proxy and llm-d's routing
sidecar send it with max_tokens 1; SGLang's prefill server stops there too): the scheduler
runs requests of (prompt, 1 token), chunked prefill and all, and its TTFT is the prefill
queue plus the prefill. A decode replica never computes a prompt: a request lands with its KV
already transferred, takes one token of the step it joins (vLLM schedules it with the
prompt's tokens counted as computed by the connector; SGLang's decode server has no prefill
batch), then decodes. `DecodeTimer` times the scheduler's steps so: a request's arrival
piece costs what one more decoding sequence over its context costs, never a prefill chunk,
and the token budget is no limit on how many land in a step. Admission (seats, KV blocks,
preemption) stays the engine's own (tokenfleet.scheduling).

Each role's goodput capacity is the highest Poisson rate at which ROLE_ATTAINMENT of its
requests meet its share of the SLO, found by the same bracketing as the aggregated search
(load.py's constants). A request is good when both roles kept their share, so each role is
held to 1 - (1 - 0.95) / 2 = 97.5%: by the union bound at least 95% of requests then meet
both, the aggregated plan's own test. This is the stricter side of the comparison, on
purpose: disaggregation is chosen only where it is cheaper even so.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import lru_cache

from tokenfleet.capacity.load import (
    BISECTION_STEPS,
    EXTRA_HALVINGS,
    GOODPUT_ATTAINMENT,
    OPEN_MEASURED,
    RESOLUTION,
    Replica,
    closed,
    open_run,
)
from tokenfleet.capacity.overheads import request_overhead_s
from tokenfleet.capacity.performance import StepModel
from tokenfleet.capacity.types import Plan
from tokenfleet.scheduling.core import StepTimer
from tokenfleet.scheduling.virtual import LoadStats

ROLE_ATTAINMENT = 1 - (1 - GOODPUT_ATTAINMENT) / 2
# Poisson arrivals counted per role run: as many misses allowed at ROLE_ATTAINMENT as the
# aggregated run allows at GOODPUT_ATTAINMENT over OPEN_MEASURED, so a role's test is no
# noisier than the aggregated one (64 x 5% = 128 x 2.5%: 3 misses).
ROLE_MEASURED = round(OPEN_MEASURED * (1 - GOODPUT_ATTAINMENT) / (1 - ROLE_ATTAINMENT))
# Where the search looks first, as a share of the closed-loop saturation throughput (the
# aggregated search's GUESS_OF_SATURATION).
FIRST_GUESS = 0.8
# The aggregated search's budget of runs (load.py): its bisections and its extra halvings.
BISECTIONS = BISECTION_STEPS
HALVINGS = EXTRA_HALVINGS + 3  # from 0.8 down to 0.8 / 128 of the saturation rate


@dataclass(frozen=True)
class DecodeTimer:
    """A decode replica's steps: an arriving request's piece (its whole prompt, already
    transferred) is timed as one more decoding sequence over that context; the rest is the
    step model's decode step."""

    inner: StepTimer  # the step model (or the simulator's timer over it)
    prompt_tokens: int

    def step_seconds(
        self,
        prefill_tokens: int,
        decode_seqs: int,
        decode_context_tokens: int,
        prefill_attention_pairs: float | None = None,
    ) -> float:
        landing = -(-prefill_tokens // max(self.prompt_tokens, 1)) if prefill_tokens > 0 else 0
        return self.inner.step_seconds(
            0, decode_seqs + landing, decode_context_tokens + max(prefill_tokens, 0)
        )


def prefill_replica(p: Plan) -> Replica:
    return Replica.for_plan(p)


def decode_replica(p: Plan, prompt_tokens: int) -> Replica:
    """The decode role's scheduler: every seat can take a landing request in one step (a
    landing costs one token of budget in the engine, not its prompt), and it never runs a
    separate prefill batch."""
    r = Replica.for_plan(p)
    budget = max(r.max_num_batched_tokens, r.max_num_seqs * (prompt_tokens + 1))
    return replace(r, max_num_batched_tokens=budget, mixed_prefill=True,
                   long_prefill_token_threshold=0)  # fmt: skip


def passes(stats: LoadStats | None) -> bool:
    return stats is not None and not stats.saturated and stats.attainment >= ROLE_ATTAINMENT


# --- prefill ---------------------------------------------------------------------------


def prefill_one(step: StepModel, replica: Replica, prompt: int) -> LoadStats:
    return closed(step, replica, 1, prompt, 1)


def prefill_saturation(step: StepModel, replica: Replica, prompt: int) -> float:
    return closed(step, replica, replica.held(prompt + 1), prompt, 1).requests_per_second


def prefill_run(
    step: StepModel, replica: Replica, prompt: int, ttft_budget_s: float, rate: float
) -> LoadStats:
    one = prefill_one(step, replica, prompt)
    slo = (ttft_budget_s, math.inf)
    overhead = request_overhead_s(replica.engine, prompt)
    return role_open(step, replica, rate, prompt, 1, slo, rate * one.e2e_mean * 2, overhead)


# --- decode ----------------------------------------------------------------------------


@lru_cache(maxsize=256)
def decode_closed(
    timer: DecodeTimer, replica: Replica, concurrency: int, prompt: int, output: int
) -> LoadStats:
    # No client overhead: the prefill role's run counts it.
    return closed(timer, replica, concurrency, prompt, output, overhead_s=0.0)


@lru_cache(maxsize=1024)
def role_open(
    timer: StepModel | DecodeTimer,
    replica: Replica,
    rate: float,
    prompt: int,
    output: int,
    slo: tuple[float, float],
    in_flight: float,
    overhead_s: float,
) -> LoadStats:
    """Poisson arrivals at `rate`, ROLE_MEASURED of them counted after a warm-up of what the
    replica holds in flight (load.open_'s run, at the role's attainment). A decode role's
    run has no client overhead: the prefill role's run counts it."""
    return open_run(
        timer, replica, rate, (prompt, output), ROLE_MEASURED, slo, in_flight, overhead_s,
        ROLE_ATTAINMENT, early_give_up=True,
    )  # fmt: skip


def decode_one(timer: DecodeTimer, replica: Replica, prompt: int, output: int) -> LoadStats:
    return decode_closed(timer, replica, 1, prompt, output)


def decode_saturation(timer: DecodeTimer, replica: Replica, prompt: int, output: int) -> float:
    busy = replica.held(prompt + output)
    return decode_closed(timer, replica, busy, prompt, output).requests_per_second


def decode_run(
    timer: DecodeTimer,
    replica: Replica,
    prompt: int,
    output: int,
    slo: tuple[float, float],
    rate: float,
) -> LoadStats:
    one = decode_one(timer, replica, prompt, output)
    return role_open(timer, replica, rate, prompt, output, slo, rate * one.e2e_mean * 2, 0.0)


# --- the search ------------------------------------------------------------------------


def capacity(
    run: Callable[[float], LoadStats], one_passes: bool, ceiling: float
) -> tuple[float, LoadStats | None]:
    """The highest rate `run` passes at (ROLE_ATTAINMENT, not saturated), bracketed as the
    aggregated goodput search is: a first guess below the saturation `ceiling`; on a miss,
    halvings of the rate until one passes (a lone request meets the budget, so some rate
    does; at most HALVINGS); then halvings of the bracket until it is within RESOLUTION.
    Returns the bracket's lower end (0 when even a lone request misses, or no rate down to
    ceiling / 2**HALVINGS passed) and the run there."""
    if not one_passes or not ceiling > 0:
        return 0.0, None
    lo, hi, best = 0.0, ceiling, None
    rate = FIRST_GUESS * ceiling
    for _ in range(HALVINGS + 1):
        stats = run(rate)
        if passes(stats):
            lo, best = rate, stats
            break
        hi, rate = rate, rate / 2
    if best is None:
        return 0.0, None
    for _ in range(BISECTIONS):
        if hi - lo <= RESOLUTION * hi:
            break
        mid = (lo + hi) / 2
        stats = run(mid)
        if passes(stats):
            lo, best = mid, stats
        else:
            hi = mid
    return lo, best
