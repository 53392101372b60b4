"""The open loop's saturated verdict (virtual._piled_up): the admission queue never empties
back to where it was. Overloaded runs are flagged; sustained runs whose requests in the
system jump with lockstep batch completions, or that are all fill-up, are not."""

from __future__ import annotations

from typing import Any

import pytest

from tests.support.step_timers import Roofline
from tokenfleet.capacity import PlanRequest, get_gpu, load, load_model, planner
from tokenfleet.scheduling.core import SchedulerConfig, SimRequest
from tokenfleet.scheduling.virtual import _piled_up, closed_loop, open_loop


def _requests(waits_ms: list[float], gap: float = 0.01) -> list[SimRequest]:
    out = []
    for i, wait in enumerate(waits_ms):
        r = SimRequest(f"r{i}", 100, 10, i * gap)
        r.scheduled_at = r.arrival + wait / 1e3
        out.append(r)
    return out


SAWTOOTH = [1, 20, 40, 60, 80, 100, 5, 2, 30, 60, 90, 3] * 5 + [1, 2, 3, 4]
WAITS = {
    # A queue growing at (rate - admissions) x time, with noise: flagged.
    "growing queue": ([2 * i + (7 * i) % 5 for i in range(64)], True),
    "growing from a backlog": ([300 + 10 * i for i in range(64)], True),
    # Bursts taken in and drained again and again: not flagged, whatever their height.
    "sawtooth": (SAWTOOTH, False),
    "sawtooth ending in a ramp": (SAWTOOTH[:48] + [5 + 25 * i for i in range(16)], False),
    "no queue": ([0.0] * 64, False),
    # A burst at the start, drained: not flagged.
    "drained burst": ([200 - 3 * i if i < 60 else 1 for i in range(64)], False),
}


@pytest.mark.parametrize("name", WAITS)
def test_the_verdict_on_admission_waits(name: str) -> None:
    waits, saturated = WAITS[name]
    assert _piled_up(_requests(waits)) is saturated


TIMER = Roofline(0.005, 2e-5, 1e-4, 1e-7)
CONFIG = SchedulerConfig(
    kv_cache_tokens=64_000, max_num_seqs=64, max_num_batched_tokens=1024, max_model_len=4096
)


@pytest.mark.parametrize("shape", [(900, 120), (512, 128), (2048, 300)])
def test_rates_past_the_saturation_throughput_are_flagged(shape: tuple[int, int]) -> None:
    """Rates past the closed loop's throughput with every slot busy pile up; rates below it
    do not (runs long enough to fill the slots: 240 Poisson requests, 80 warm-up)."""
    saturation = closed_loop(CONFIG, TIMER, 64, [shape], 64).requests_per_second
    verdicts = {
        f: open_loop(CONFIG, TIMER, f * saturation, [shape], 240, warmup=80).saturated
        for f in (0.2, 0.6, 0.8, 0.9, 1.2, 1.5, 2.0)
    }
    assert verdicts == {0.2: False, 0.6: False, 0.8: False, 0.9: False,
                        1.2: True, 1.5: True, 2.0: True}  # fmt: skip


def _gpt_oss_tp2() -> tuple[Any, ...]:
    """gpt-oss-120b at TP 2 on H100, 512/128 tokens, TTFT 500 ms / TPOT 50 ms: the replica
    and step model plan() searches, its start (closed loops) and SLO."""
    req = PlanRequest(
        arch=load_model("openai/gpt-oss-120b"),
        gpu=get_gpu("h100-sxm"),
        input_tokens=512,
        output_tokens=128,
        concurrency=32,
        tensor_parallel_size=2,
        pipeline_parallel_size=1,
        pipeline_auto=False,
    )
    ctx = planner._context(req)
    s = planner._size(ctx, planner._candidates(req, ctx.per_node))
    slo = (req.ttft_slo_ms / 1e3, req.tpot_slo_ms / 1e3)
    start = load.search_start(s.step, s.replica, 32, s.prefill, 128, s.slots, *slo)
    return s.step, s.replica, s.prefill, slo, start


@pytest.mark.parametrize("rate", [37.0, 50.0, 60.0, 70.0, 75.0, 76.0, 80.0])
def test_fill_up_with_lockstep_completions_is_not_saturation(rate: float) -> None:
    """These goodput-search runs end before any request finishes (one latency under load,
    about 2.7 s, is longer than the arrivals), and every request meets the SLO. The number
    in the system grows by every arrival; the admission queue empties again and again."""
    load.clear_caches()
    step, replica, prefill, slo, start = _gpt_oss_tp2()
    stats = load._probe(step, replica, prefill, 128, slo, start.one, rate)
    assert rate < start.saturation
    assert not stats.saturated and stats.attainment == 1.0


def test_the_goodput_search_stays_below_the_saturation_throughput() -> None:
    """A finite run past the saturation throughput can look sustained (all fill-up): the
    search never runs a rate at or above it, and its answer is below it."""
    load.clear_caches()
    step, replica, prefill, slo, start = _gpt_oss_tp2()
    rates: list[float] = []
    real = load._probe

    def spy(*args: Any) -> Any:
        rates.append(args[-1])
        return real(*args)

    load._probe = spy
    try:
        saturation = start.saturation
        rate, good = load.goodput_capacity(
            step, replica, prefill, 128, *slo, saturation * load.CEILING_OF_SATURATION,
            start.guess, start.one, start.probe,
        )  # fmt: skip
    finally:
        load._probe = real
    assert rates and max(rates) < saturation
    assert 0.8 * saturation <= rate < saturation and good is not None


def test_a_tiny_change_of_the_start_does_not_move_the_goodput() -> None:
    """The search starts from the saturation throughput: scaled by 1 -/+ 0.1%, its runs all
    scale with it, and so does the answer (no verdict flips)."""
    step, replica, prefill, slo, start = _gpt_oss_tp2()
    answers = []
    for f in (0.999, 1.0, 1.001):
        load.clear_caches()
        s = start
        saturation = s.saturation * f
        rate, _ = load.goodput_capacity(
            step, replica, prefill, 128, *slo, saturation * load.CEILING_OF_SATURATION,
            load.GUESS_OF_SATURATION * saturation, s.one, saturation,
        )  # fmt: skip
        answers.append(rate / f)
    assert answers[0] == pytest.approx(answers[1], rel=1e-9)
    assert answers[2] == pytest.approx(answers[1], rel=1e-9)
