"""plan() latency for catalog models (target: median under 2 ms).

Run with `make bench` (pytest-benchmark prints min / median / mean per model). Under
`make test` benchmarks are disabled and each body runs once, as a smoke test.
"""

import pytest

from tokenfleet.capacity import PlanRequest, get_gpu, load_model, plan


@pytest.mark.parametrize(
    "model,gpu",
    [
        ("meta-llama/Llama-3.1-8B", "l4"),
        ("meta-llama/Llama-3.1-405B", "h100-sxm"),
        ("openai/gpt-oss-120b", "h100-sxm"),
        ("deepseek-ai/DeepSeek-V3", "h200"),
    ],
)
def test_plan_latency(benchmark, model, gpu):
    req = PlanRequest(arch=load_model(model), gpu=get_gpu(gpu))
    result = benchmark(plan, req)
    assert result.gpus_per_replica >= 1
