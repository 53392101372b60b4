"""plan() latency for catalog models (target: median under 20 ms).

Run with `make bench` (pytest-benchmark prints min / median / mean per model). Under
`make test` benchmarks are disabled and each body runs once, as a smoke test.

plan() predicts latency by running the scheduler core in virtual time (a closed loop at the
target concurrency, the saturation throughput and a short search for the goodput rate);
those runs are cached on their inputs, so an operator re-planning an unchanged spec pays
only the memory model. `cold` clears the caches before every call (a spec seen for the
first time: what an operator pays for a new LLMService, and what the 20 ms target is
about), `warm` does not (every later reconcile of it).

This times the build it imports: the checkout's pure Python by default. The operator
image's, with the scheduler core compiled: `make compiled`, then this file with
PYTHONPATH=build/compiled/site (docs/benchmarks.md has both).
"""

import pytest

from tokenfleet.capacity import PlanRequest, get_gpu, load, load_model, plan

MODELS = [
    ("meta-llama/Llama-3.1-8B", "l4"),
    ("meta-llama/Llama-3.1-8B", "h100-sxm"),
    ("meta-llama/Llama-3.1-405B", "h100-sxm"),
    ("openai/gpt-oss-120b", "h100-sxm"),
    ("deepseek-ai/DeepSeek-V3", "h200"),
]


def plan_cold(req: PlanRequest):
    load.clear_caches()
    return plan(req)


@pytest.mark.parametrize("mode", ["cold", "warm"])
@pytest.mark.parametrize("model,gpu", MODELS)
def test_plan_latency(benchmark, model, gpu, mode):
    req = PlanRequest(arch=load_model(model), gpu=get_gpu(gpu))
    result = benchmark(plan_cold if mode == "cold" else plan, req)
    assert result.gpus_per_replica >= 1
    assert result.predicted.concurrency == req.concurrency
