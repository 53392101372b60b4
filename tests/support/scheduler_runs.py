"""Runs of tokenfleet.scheduling's schedulers for the tests that compare two of them: drive
one through arrivals as the engine loop does, run the fleet replay's fast replica over the
same arrivals, hold the lazy load runs to the exact ones over a table of loads, and count
what a fast path took."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import pytest

from tokenfleet.autoscale.fleetsim.replica import FastReplica, FleetRequest
from tokenfleet.capacity.types import Plan
from tokenfleet.engines.registry import engine
from tokenfleet.scheduling.core import (
    Arrival,
    Scheduler,
    SchedulerConfig,
    SimRequest,
    StepTimer,
)
from tokenfleet.scheduling.virtual import closed_loop, offline, open_loop
from tokenfleet.sim.exporter import EngineMetrics


def drive(
    scheduler: Scheduler, arrivals: list[tuple[float, int, int]], fast: bool = True
) -> list[SimRequest]:
    """Every (arrival, prompt, output) run to completion; the requests, with their times.
    `fast`: take the scheduler's fast-forward jumps (False: step by step)."""
    requests = [SimRequest(f"r{i}", p, o, at) for i, (at, p, o) in enumerate(arrivals)]
    todo = list(requests)
    now = 0.0
    while todo or not scheduler.idle:
        while todo and todo[0].arrival <= now:
            scheduler.add(todo.pop(0))
        if fast:
            jump = scheduler.fast_forward(now, todo[0].arrival if todo else None)
            if jump is not None:
                now = jump.end
                continue
        step = scheduler.schedule(now)
        if step is None:
            now = todo[0].arrival
            continue
        now = scheduler.complete(step).end
    return requests


def run_exported(scheduler: Scheduler, metrics: EngineMetrics) -> float:
    """The scheduler's requests run step by step to the end, each step shown to the
    simulator's `metrics` as its engine loop does; when the last step ends."""
    now = 0.0
    while not scheduler.idle:
        step = scheduler.schedule(now)
        assert step is not None
        outcome = scheduler.complete(step)
        metrics.on_step(step, outcome, scheduler)
        now = outcome.end
    return now


def assert_lazy_runs_match(
    config: SchedulerConfig,
    timer: StepTimer,
    shapes: Sequence[tuple[int, int]],
    *,
    clients: Sequence[int],
    rates: Sequence[float],
    closed_requests: int,
    open_requests: int,
    slo: tuple[float, float],
    give_ups: Sequence[float | None] = (None,),
    offline_requests: int | None = None,
) -> None:
    """Each closed loop (per client count), open loop (per rate and give-up threshold) and
    optionally the offline run report the same statistics lazily as with exact=True."""
    for c in clients:
        expected = closed_loop(config, timer, c, shapes, closed_requests, slo, exact=True)
        assert closed_loop(config, timer, c, shapes, closed_requests, slo) == expected
    for rate in rates:
        for give_up in give_ups:
            expected = open_loop(config, timer, rate, shapes, open_requests, slo,
                                 give_up_below=give_up, exact=True)  # fmt: skip
            got = open_loop(config, timer, rate, shapes, open_requests, slo,
                            give_up_below=give_up)  # fmt: skip
            assert got == expected
    if offline_requests is not None:
        expected_offline = offline(config, timer, shapes, offline_requests, exact=True)
        assert offline(config, timer, shapes, offline_requests) == expected_offline


def count_calls(
    monkeypatch: pytest.MonkeyPatch, owner: type, name: str, measure: Callable[[Any], int | None]
) -> list[int]:
    """Wrap owner.name: each call's result measured, kept where the measure is not None."""
    taken: list[int] = []
    original = getattr(owner, name)

    def counted(self: Any, *args: Any, **kwargs: Any) -> Any:
        result = original(self, *args, **kwargs)
        n = measure(result)
        if n is not None:
            taken.append(n)
        return result

    monkeypatch.setattr(owner, name, counted)
    return taken


def fast_replica_run(
    config: SchedulerConfig, timer: StepTimer, arrivals: list[Arrival]
) -> list[FleetRequest]:
    """The fleet replay's FastReplica over `arrivals`, drained; its requests, with times."""
    replica = FastReplica(config, timer)
    requests = []
    for a in arrivals:
        replica.advance(a.at)
        request = FleetRequest(a.at, a.prompt_tokens, a.max_tokens)
        replica.add(request)
        requests.append(request)
    replica.drain()
    return requests


def steady_replica(p: Plan, prompt: int, output: int) -> tuple[SchedulerConfig, int]:
    """The planned replica as a scheduler config (its engine's page and batching policy from
    the registry), and the most clients (up to 64, as plan() simulates) whose whole
    requests of `prompt` + `output` tokens fit its KV cache: a steady state without
    preemption."""
    record = engine(p.engine)
    config = SchedulerConfig(
        kv_cache_tokens=p.kv_cache_tokens,
        max_num_seqs=p.max_num_seqs,
        max_num_batched_tokens=p.max_num_batched_tokens,
        max_model_len=p.max_model_len,
        block_size=record.block_size,
        mixed_prefill=record.mixed_prefill,
    )
    return config, min(64, p.max_num_seqs, p.kv_cache_tokens // (prompt + output + 16))
