"""steady.closed_loop_rate (a closed loop's throughput solved as its steady state) against
the simulated closed loop (virtual.closed_loop) on a table of cases: within 5%, the
tolerance of the gate in docs/benchmarks.md. Step times of a known shape (step_timers) and
the capacity model's own, on vLLM's mixed steps and SGLang's prefill batches, with prompts
that fit a step's budget and prompts chunked over several, with and without the time a
request spends outside the engine."""

from __future__ import annotations

import math

import pytest

from tests.support.scheduler_runs import steady_replica
from tests.support.step_timers import Roofline
from tokenfleet.capacity import PlanRequest, get_gpu, load_model, plan, step_model
from tokenfleet.capacity.overheads import request_overhead_s
from tokenfleet.scheduling.core import SchedulerConfig, StepTimer
from tokenfleet.scheduling.steady import _cohorts, closed_loop_rate
from tokenfleet.scheduling.virtual import closed_loop

TOLERANCE = 0.05
# A memory-bound floor per step, then prompt tokens, decodes and context as a GPU has them.
ROOF = Roofline(0.012, 6e-5, 2e-5, 4e-8, 1e-9)


def _simulated(
    config: SchedulerConfig, timer: StepTimer, clients: int, shape: tuple[int, int], h: float
) -> float:
    measured = max(32, clients // 2)
    return closed_loop(
        config, timer, clients, [shape], measured, request_overhead=h
    ).requests_per_second


ROOFLINE_CASES = {
    "mixed, whole prompts": (SchedulerConfig(2_000_000, 64, 2048, 16384), 48, (1024, 200), 0.0),
    "mixed, chunked prompts": (SchedulerConfig(2_000_000, 64, 1024, 16384), 40, (4000, 300), 0.0),
    "mixed, many short": (SchedulerConfig(2_000_000, 128, 8192, 16384), 96, (300, 100), 0.02),
    "mixed, budget-bound": (SchedulerConfig(2_000_000, 64, 512, 16384), 64, (2000, 40), 0.0),
    "prefill batches": (
        SchedulerConfig(2_000_000, 64, 2048, 16384, block_size=1, mixed_prefill=False),
        48,
        (1024, 200),
        0.05,
    ),
    "prefill batches, chunked": (
        SchedulerConfig(2_000_000, 64, 1024, 16384, block_size=1, mixed_prefill=False),
        32,
        (3000, 300),
        0.0,
    ),
}


@pytest.mark.parametrize("name", sorted(ROOFLINE_CASES))
def test_steady_state_matches_the_simulated_loop(name: str) -> None:
    config, clients, shape, overhead = ROOFLINE_CASES[name]
    simulated = _simulated(config, ROOF, clients, shape, overhead)
    estimated = closed_loop_rate(config, ROOF, clients, *shape, overhead)
    assert estimated == pytest.approx(simulated, rel=TOLERANCE), name


CATALOG_CASES = [
    ("meta-llama/Llama-3.1-8B", "h100-sxm", "vllm", 1, (2048, 300)),
    ("meta-llama/Llama-3.1-8B", "l4", "vllm", 2, (2048, 300)),
    ("openai/gpt-oss-120b", "h100-sxm", "vllm", 2, (512, 128)),
    ("meta-llama/Llama-3.1-70B", "h100-sxm", "vllm", 4, (8000, 500)),
    ("meta-llama/Llama-3.1-8B", "h100-sxm", "sglang", 1, (2048, 300)),
    ("Qwen/Qwen3-30B-A3B", "h200", "sglang", 2, (512, 128)),
]


@pytest.mark.parametrize(("model", "gpu", "engine", "tp", "shape"), CATALOG_CASES)
def test_steady_state_on_the_capacity_models_step_times(
    model: str, gpu: str, engine: str, tp: int, shape: tuple[int, int]
) -> None:
    """64 clients (plan() simulates up to 64 requests one by one), whose full requests fit
    the KV cache (the steady state has no preemption)."""
    inp, out = shape
    req = PlanRequest(
        arch=load_model(model),
        gpu=get_gpu(gpu),
        engine=engine,
        tensor_parallel_size=tp,
        input_tokens=inp,
        output_tokens=out,
    )
    p = plan(req)
    config, clients = steady_replica(p, inp, out)
    timer = step_model(p)
    overhead = request_overhead_s(engine, inp)
    simulated = _simulated(config, timer, clients, shape, overhead)
    estimated = closed_loop_rate(config, timer, clients, inp, out, overhead)
    assert estimated == pytest.approx(simulated, rel=TOLERANCE)


def test_more_clients_never_lower_the_throughput() -> None:
    config = ROOFLINE_CASES["mixed, whole prompts"][0]
    rates = [closed_loop_rate(config, ROOF, n, 1024, 200) for n in (1, 4, 16, 48, 64)]
    assert rates == sorted(rates)
    assert rates[-1] > 2 * rates[0]


def test_the_token_budget_caps_the_throughput() -> None:
    """Past the clients whose prompts fill every step's budget, more clients only queue."""
    config = ROOFLINE_CASES["mixed, budget-bound"][0]
    budget_bound = closed_loop_rate(config, ROOF, 64, 2000, 40)
    step = ROOF.step_seconds(512, 0, 0)
    assert budget_bound <= 512 / 2000 / step
    assert closed_loop_rate(config, ROOF, 60, 2000, 40) == pytest.approx(budget_bound)


@pytest.mark.parametrize("arrivals", [0.05, 0.5, 2.0, 12.0, 700.0])
def test_a_cycles_prompts_keep_their_mean_and_cluster(arrivals: float) -> None:
    """SGLang's prompts per cycle: the first pass's prefill batches come back as cohorts, so
    the count keeps the mean of the arrivals but more cycles have none than independent
    arrivals (Poisson) would leave empty, at a bounded cost whatever the arrivals."""
    counts, size = _cohorts(arrivals)
    assert len(counts) < 20
    assert sum(counts) == pytest.approx(1, abs=1e-8)
    assert sum(m * p for m, p in enumerate(counts)) * size == pytest.approx(arrivals, rel=1e-6)
    assert size >= 1
    assert counts[0] > math.exp(-arrivals)
