"""The simulator's scheduler driven by the real capacity model agrees with the planner.

At concurrency 1 the simulated TTFT and TPOT must be within 10% of plan()'s prediction for a
PlanRequest with concurrency=1; KV capacity and max-num-seqs must bound what runs, as sized.
plan()'s TTFT includes the engine's per-request frontend overhead (HTTP, tokeniser:
capacity/overheads.py), which the simulator's scheduler does not charge: it is taken out here.
"""

from __future__ import annotations

import pytest

from tokenfleet.capacity import PlanRequest, get_gpu, load_model, plan, step_model
from tokenfleet.capacity.overheads import request_overhead_s
from tokenfleet.capacity.types import Plan
from tokenfleet.scheduling.core import Arrival, Scheduler, SchedulerConfig, SimRequest, simulate


def planned(model: str, gpu: str, inp: int, out: int, **overrides: int) -> Plan:
    return plan(
        PlanRequest(
            arch=load_model(model),
            gpu=get_gpu(gpu),
            concurrency=1,
            input_tokens=inp,
            output_tokens=out,
            **overrides,  # type: ignore[arg-type]
        )
    )


def config_of(p: Plan, **overrides: int) -> SchedulerConfig:
    values = {
        "kv_cache_tokens": p.kv_cache_tokens,
        "max_num_seqs": p.max_num_seqs,
        "max_num_batched_tokens": p.max_num_batched_tokens,
        "max_model_len": p.max_model_len,
        **overrides,
    }
    return SchedulerConfig(**values)


@pytest.mark.parametrize(
    ("model", "gpu", "inp", "out"),
    [
        ("meta-llama/Llama-3.1-8B", "l4", 2048, 300),
        ("meta-llama/Llama-3.1-8B", "h100-sxm", 1024, 200),
        ("meta-llama/Llama-3.1-70B", "h100-sxm", 2048, 300),  # TP 2
        ("Qwen/Qwen3-30B-A3B", "h100-sxm", 512, 128),  # MoE
        ("openai/gpt-oss-20b", "l40s", 1000, 100),  # sliding window + MoE
        ("meta-llama/Llama-3.1-8B", "l4", 4096, 300),  # chunked prefill: 2 chunks of 2048
    ],
)
def test_low_load_ttft_and_tpot_match_the_plan(model: str, gpu: str, inp: int, out: int) -> None:
    p = planned(model, gpu, inp, out)
    (request,) = simulate(config_of(p), step_model(p), [Arrival(0.0, inp, out)])
    assert request.first_token_at is not None and request.last_token_at is not None
    ttft_ms = (request.first_token_at - request.arrival) * 1e3
    tpot_ms = (request.last_token_at - request.first_token_at) / (out - 1) * 1e3
    overhead_ms = request_overhead_s(p.engine, inp) * 1e3
    assert ttft_ms == pytest.approx(p.predicted.ttft_ms - overhead_ms, rel=0.10)
    assert tpot_ms == pytest.approx(p.predicted.tpot_ms, rel=0.10)


def run_tracking(scheduler: Scheduler, requests: list[SimRequest]) -> tuple[int, int]:
    """Run all requests (arriving at once) to completion; return (max running, max KV
    tokens held), checking the KV cache is never overcommitted."""
    for request in requests:
        scheduler.add(request)
    now, max_running, max_held = 0.0, 0, 0
    size = scheduler.config.block_size
    while not scheduler.idle:
        step = scheduler.schedule(now)
        assert step is not None
        held = sum(r.blocks for r in scheduler.running) * size
        assert held <= scheduler.config.num_blocks * size
        max_running = max(max_running, len(scheduler.running))
        max_held = max(max_held, held)
        now = scheduler.complete(step).end
    return max_running, max_held


def test_kv_capacity_bounds_admission_and_forces_preemption() -> None:
    p = planned("meta-llama/Llama-3.1-8B", "l4", 2048, 300, max_model_len=4096)
    prompt, out = 3000, 1000  # 4000 tokens each once finished: 250 blocks
    fits_prompt = p.kv_cache_tokens // (prompt + 16)
    cfg = config_of(p, max_num_seqs=256)
    scheduler = Scheduler(cfg, step_model(p))
    requests = [SimRequest(f"r{i}", prompt, out, 0.0) for i in range(2 * fits_prompt)]
    max_running, max_held = run_tracking(scheduler, requests)
    # Admission reserves only what the prompt needs, like vLLM V1: as many as the prompts fit...
    assert max_running <= fits_prompt + 1
    assert max_held >= 0.9 * cfg.num_blocks * cfg.block_size
    # ...so they outgrow the cache while decoding and the newest are preempted.
    assert scheduler.num_preemptions > 0
    assert all(r.output_tokens == out for r in requests)


@pytest.mark.parametrize("seqs", [4, 16])
def test_max_num_seqs_bounds_running_and_queueing_raises_ttft(seqs: int) -> None:
    p = planned("meta-llama/Llama-3.1-8B", "h100-sxm", 512, 64)
    cfg = config_of(p, max_num_seqs=seqs)
    arrivals = [Arrival(0.0, 512, 64) for _ in range(3 * seqs)]
    scheduler = Scheduler(cfg, step_model(p))
    requests = [
        SimRequest(f"r{i}", a.prompt_tokens, a.max_tokens, a.at) for i, a in enumerate(arrivals)
    ]
    max_running, _ = run_tracking(scheduler, requests)
    assert max_running == seqs
    ttft = [r.first_token_at - r.arrival for r in requests if r.first_token_at is not None]
    queued = [r.scheduled_at - r.arrival for r in requests if r.scheduled_at is not None]
    # The first wave starts at once; each later wave waits for a whole earlier wave to finish.
    assert queued[:seqs] == [0.0] * seqs
    assert min(queued[seqs:]) > 0
    first_wave_e2e = max(r.finished_at for r in requests[:seqs] if r.finished_at is not None)
    assert min(ttft[2 * seqs :]) > first_wave_e2e
    assert ttft[-1] > 10 * p.predicted.ttft_ms / 1e3
