"""The simulator schedules as the engine version it names: the admission rules plan() runs
(prefix caching, whole-sequence admission, SGLang's output reservation), so beyond its KV
cache it queues as vLLM does instead of thrashing."""

from __future__ import annotations

import argparse
from dataclasses import replace

import pytest

from tokenfleet.capacity import load
from tokenfleet.capacity.load import Replica
from tokenfleet.cli import build_parser
from tokenfleet.scheduling.core import Arrival, SchedulerConfig, StepTimer, simulate
from tokenfleet.sim.setup import plan_for, settings_from_args

PROMPT, OUTPUT = 4096, 512


def _args(*extra: str) -> argparse.Namespace:
    # The case: Qwen3-32B on one 80 GB GPU, a KV cache of about 11 such requests.
    base = ["sim", "--model", "Qwen/Qwen3-32B", "--gpu", "a100-80gb", "--tp", "1"]
    return build_parser().parse_args([*base, *extra])


@pytest.mark.parametrize(
    ("extra", "rules"),
    [
        # (prefix_caching, reserve_full_sequence, reserve_outputs)
        (["--engine-version", "0.11.0"], (True, False, False)),
        (["--engine-version", "0.32.0"], (True, True, False)),
        (["--engine", "sglang"], (False, False, True)),
    ],
)
def test_the_sim_runs_the_rules_plan_runs(extra: list[str], rules: tuple[bool, ...]) -> None:
    args = _args(*extra)
    settings, timer, _ = settings_from_args(args)
    config = settings.config
    assert (config.prefix_caching, config.reserve_full_sequence, config.reserve_outputs) == rules
    # The very scheduler plan()'s load runs step for this replica (one request per copy).
    _, planned, w = load.lockstep(Replica.for_plan(plan_for(args)), timer, 1, 1)
    assert w == 1 and config == planned


def _burst(config: SchedulerConfig, timer: StepTimer, n: int) -> tuple[float, int, float]:
    """n requests at t = 0: (output tokens/s over the makespan, preemptions, the longest
    admission wait)."""
    done = simulate(config, timer, [Arrival(0.0, PROMPT, OUTPUT)] * n)
    makespan = max(r.finished_at or 0.0 for r in done)
    waits = max((r.scheduled_at or 0.0) - r.arrival for r in done)
    return n * OUTPUT / makespan, sum(r.num_preemptions for r in done), waits


@pytest.mark.parametrize("version", ["0.11.0", "0.32.0"])
def test_beyond_its_kv_cache_the_sim_queues_and_holds_its_throughput(version: str) -> None:
    args = _args("--engine-version", version)
    settings, timer, _ = settings_from_args(args)
    config = settings.config
    held = config.kv_cache_tokens // (PROMPT + OUTPUT)
    at_kv, _, _ = _burst(config, timer, held)
    beyond, preemptions, longest_wait = _burst(config, timer, 4 * held)
    # vLLM holds its throughput beyond the KV cache: it admits what the cache holds and
    # queues the rest (tests/system/test_scheduler_vs_vllm.py, docs/evaluation.md).
    assert beyond >= 0.95 * at_kv
    assert preemptions < held and longest_wait > 0
    # The same burst as plan --benchmark burst predicts it.
    replica = replace(Replica.for_plan(plan_for(args)), kv_cache_tokens=config.kv_cache_tokens)
    predicted = load.benchmark(timer, replica, "burst", PROMPT, OUTPUT, 4 * held, overhead_s=0.0)
    assert predicted.output_tokens_per_second == pytest.approx(beyond, rel=0.01)
    # Without the rules the same scheduler thrashes (vLLM does too, driven so): the rules
    # are what the sim now runs.
    bare = replace(config, prefix_caching=False, reserve_full_sequence=False)
    collapsed, thrash, _ = _burst(bare, timer, 4 * held)
    assert collapsed < 0.6 * at_kv and thrash > 10 * held
