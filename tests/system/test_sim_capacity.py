"""`tokenfleet sim` as a process, at a high --time-scale, against the capacity model.

Its /metrics (in simulated seconds) must show the planner's concurrency-1 TTFT and TPOT
within 10% at low load, and queueing and preemption once the KV cache is made small.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.support.sims import SimProcess
from tokenfleet.capacity import PlanRequest, get_gpu, load_model, plan
from tokenfleet.capacity.overheads import request_overhead_s

pytestmark = pytest.mark.system

MODEL, GPU = "meta-llama/Llama-3.1-8B", "l4"
INPUT, OUTPUT = 2048, 300
TIME_SCALE = "100"


def scrape(sim: SimProcess) -> dict[str, float]:
    values: dict[str, float] = {}
    text = httpx.get(f"{sim.base_url}/metrics", timeout=10).text
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            values[sample.name] = values.get(sample.name, 0.0) + sample.value
    return values


@pytest.mark.parametrize(
    ("engine", "ttft", "tpot"),
    [
        ("vllm", "vllm:time_to_first_token_seconds", "vllm:request_time_per_output_token_seconds"),
        (
            "sglang",
            "sglang:time_to_first_token_seconds",
            "sglang:request_time_per_output_token_seconds",
        ),
    ],
)
def test_low_load_latency_matches_the_plan(
    start_sim: Callable[..., SimProcess], engine: str, ttft: str, tpot: str
) -> None:
    predicted = plan(
        PlanRequest(
            arch=load_model(MODEL),
            gpu=get_gpu(GPU),
            engine=engine,  # type: ignore[arg-type]
            concurrency=1,
            input_tokens=INPUT,
            output_tokens=OUTPUT,
        )
    ).predicted
    sim = start_sim("--model", MODEL, "--gpu", GPU, "--engine", engine, "--time-scale", TIME_SCALE)
    for stream in (False, True, False):  # one at a time: concurrency 1
        body = {"prompt": [7] * INPUT, "max_tokens": OUTPUT, "stream": stream}
        response = httpx.post(f"{sim.base_url}/v1/completions", json=body, timeout=120)
        assert response.status_code == 200
    values = scrape(sim)
    assert values[f"{ttft}_count"] == 3
    mean_ttft_ms = values[f"{ttft}_sum"] / 3 * 1e3
    mean_tpot_ms = values[f"{tpot}_sum"] / values[f"{tpot}_count"] * 1e3
    print(
        f"\n{engine}: TTFT sim {mean_ttft_ms:.1f} ms vs plan {predicted.ttft_ms:.1f} ms; "
        f"TPOT sim {mean_tpot_ms:.2f} ms vs plan {predicted.tpot_ms:.2f} ms"
    )
    # plan() adds the engine frontend's per-request overhead the simulator does not charge.
    overhead_ms = request_overhead_s(engine, INPUT) * 1e3
    assert mean_ttft_ms == pytest.approx(predicted.ttft_ms - overhead_ms, rel=0.10)
    assert mean_tpot_ms == pytest.approx(predicted.tpot_ms, rel=0.10)


async def _burst(base_url: str, n: int, prompt: int, out: int) -> list[float]:
    """n concurrent streamed requests; returns the peak waiting count seen while they ran."""
    waiting: list[float] = []
    async with httpx.AsyncClient(base_url=base_url, timeout=120) as client:

        async def one() -> None:
            body = {"prompt": [3] * prompt, "max_tokens": out, "stream": True}
            async with client.stream("POST", "/v1/completions", json=body) as response:
                assert response.status_code == 200
                async for _ in response.aiter_lines():
                    pass

        async def watch(tasks: list[asyncio.Task[None]]) -> None:
            while not all(t.done() for t in tasks):
                text = (await client.get("/metrics")).text
                for family in text_string_to_metric_families(text):
                    if family.name == "vllm:num_requests_waiting":
                        waiting.append(sum(s.value for s in family.samples))
                await asyncio.sleep(0.02)

        tasks = [asyncio.create_task(one()) for _ in range(n)]
        await asyncio.gather(*tasks, watch(tasks))
    return waiting


def test_small_kv_cache_queues_and_preempts(start_sim: Callable[..., SimProcess]) -> None:
    # 8192 tokens of KV: four 1000-token prompts fit, their 1000-token outputs do not.
    sim = start_sim(
        "--model", MODEL, "--gpu", GPU, "--max-model-len", "4096",
        "--kv-cache-tokens", "8192", "--time-scale", TIME_SCALE,
    )  # fmt: skip
    waiting = asyncio.run(_burst(sim.base_url, 16, 1000, 1000))
    values = scrape(sim)
    preemptions = values["vllm:num_preemptions_total"]
    queue = values["vllm:request_queue_time_seconds_sum"] / 16
    peak = max(waiting)
    print(f"\npeak waiting {peak:.0f}; preemptions {preemptions:.0f}; mean queue {queue:.2f} s")
    assert values["vllm:request_success_total"] == 16
    assert max(waiting) > 0
    assert values["vllm:num_preemptions_total"] > 0
    assert values["vllm:request_queue_time_seconds_sum"] > 0
    # The last to be admitted waited for earlier ones: mean TTFT far above the 1-request TTFT.
    assert values["vllm:time_to_first_token_seconds_sum"] / 16 > 1.0
    assert values["vllm:kv_cache_usage_perc"] == 0  # all done, all freed
