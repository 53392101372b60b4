"""The scheduler core in virtual time: fast-forward is exact, load runs behave like engines."""

from __future__ import annotations

import pytest

from tests.support.scheduler_runs import drive
from tests.support.step_timers import Roofline
from tokenfleet.scheduling.core import Scheduler, SchedulerConfig, SimRequest
from tokenfleet.scheduling.virtual import closed_loop, open_loop

TIMER = Roofline(0.005, 2e-5, 1e-4, 1e-7)

CONFIG = SchedulerConfig(
    kv_cache_tokens=64_000, max_num_seqs=64, max_num_batched_tokens=1024, max_model_len=4096
)


def run(fast: bool, arrivals: list[tuple[float, int, int]]) -> list[SimRequest]:
    return drive(Scheduler(CONFIG, TIMER), arrivals, fast)


def test_fast_forward_matches_step_by_step() -> None:
    arrivals = [(0.05 * i, 300 + 37 * (i % 5), 50 + 13 * (i % 7)) for i in range(40)]
    slow, fast = run(False, arrivals), run(True, arrivals)
    for a, b in zip(slow, fast, strict=True):
        assert b.output_tokens == a.output_tokens
        assert b.token_times == pytest.approx(a.token_times, rel=1e-9, abs=1e-9)
        assert b.finished_at == pytest.approx(a.finished_at, rel=1e-9)
        assert b.first_token_at == pytest.approx(a.first_token_at, rel=1e-9)


def test_closed_loop_ttft_grows_with_concurrency() -> None:
    shapes = [(900, 120)]
    ttft = [closed_loop(CONFIG, TIMER, c, shapes, 48).ttft_p50 for c in (1, 8, 32, 64)]
    assert ttft == sorted(ttft) and ttft[-1] > 1.3 * ttft[0]
    # Little's law: the clients are always in the system.
    stats = closed_loop(CONFIG, TIMER, 16, shapes, 48)
    assert stats.concurrency == pytest.approx(16, rel=1e-6)


def test_open_loop_ttft_grows_with_rate_and_explodes_past_saturation() -> None:
    shapes = [(900, 120)]
    saturation = closed_loop(CONFIG, TIMER, 64, shapes, 64).requests_per_second
    runs = {
        f: open_loop(CONFIG, TIMER, f * saturation, shapes, 240, warmup=80) for f in (0.2, 0.6, 1.5)
    }
    assert runs[0.2].ttft_p95 <= runs[0.6].ttft_p95 < runs[1.5].ttft_p95
    assert not runs[0.2].saturated and not runs[0.6].saturated
    assert runs[1.5].saturated
    assert runs[1.5].ttft_p50 > 10 * runs[0.2].ttft_p50
    assert runs[0.6].requests_per_second == pytest.approx(0.6 * saturation)


def test_attainment_counts_requests_within_both_slos() -> None:
    shapes = [(900, 120)]
    loose = closed_loop(CONFIG, TIMER, 8, shapes, 32, slo=(10.0, 1.0))
    tight = closed_loop(CONFIG, TIMER, 8, shapes, 32, slo=(1e-4, 1.0))
    assert loose.attainment == 1.0 and tight.attainment == 0.0


def test_capacity_does_not_import_the_simulator() -> None:
    # The scheduler core sits below both: planning must not pull in the HTTP server.
    import subprocess
    import sys

    code = (
        "import sys, tokenfleet.capacity as c; "
        "c.plan(c.PlanRequest(arch=c.load_model('meta-llama/Llama-3.1-8B'), "
        "gpu=c.get_gpu('h100-sxm'))); "
        "print(sorted(m for m in sys.modules if m.startswith('tokenfleet.sim')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_prefill_batches_make_the_decodes_wait() -> None:
    """SGLang's policy (mixed_prefill=False): a step with a prompt to prefill carries no
    decodes. At the same load the running requests' TPOT is longer than with vLLM's mixed
    steps (each arrival's prefill pauses them and pays the step's fixed cost again), and
    TTFT is not longer (the prefill runs without the decodes)."""
    from dataclasses import replace

    mixed = CONFIG
    apart = replace(CONFIG, mixed_prefill=False)
    scheduler = Scheduler(apart, TIMER)
    first = SimRequest("a", 100, 50, 0.0)
    scheduler.add(first)
    now = scheduler.complete(scheduler.schedule(0.0)).end  # type: ignore[arg-type]
    scheduler.add(SimRequest("b", 300, 50, now))
    step = scheduler.schedule(now)
    assert step is not None and step.decode_seqs == 0 and step.prefill_tokens == 300
    assert [r.request_id for r, _ in step.work] == ["b"]

    shapes = [(600, 120)]
    together = open_loop(mixed, TIMER, 6.0, shapes, 200, seed=3)
    alone = open_loop(apart, TIMER, 6.0, shapes, 200, seed=3)
    assert alone.tpot_p50 > together.tpot_p50 * 1.02
    assert alone.ttft_p50 <= together.ttft_p50
