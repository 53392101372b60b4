"""first_wave / benchmark_loop: a closed-loop benchmark as its client runs it, every client
sending at t = 0.

The first wave queues behind each other's prefill (with 1024 batched tokens a step, 32
prompts of 1024 tokens are prefilled one a step), so its TTFT is well above the steady closed
loop's (staggered start, first wave discarded). Without mixed prefill (SGLang) the waves stay
synchronised for the whole run.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from tests.support.step_timers import Roofline
from tokenfleet.scheduling.core import SchedulerConfig
from tokenfleet.scheduling.virtual import (
    benchmark_loop,
    closed_loop,
    first_wave,
    mean_of_rounds,
    open_loop,
)

TIMER = Roofline(0.005, 2e-5, 1e-4, 1e-7)

CONFIG = SchedulerConfig(
    kv_cache_tokens=200_000, max_num_seqs=64, max_num_batched_tokens=1024, max_model_len=4096
)


def test_the_start_burst_raises_the_first_waves_ttft() -> None:
    first = first_wave(CONFIG, TIMER, 32, (1024, 128))
    assert first.requests == 32
    # The 32nd prompt waits for 31 prefills: the first wave's mean TTFT is about 16 of them.
    prefill = TIMER.step_seconds(1024, 0, 0)
    assert first.ttft_mean > 10 * prefill
    steady = closed_loop(CONFIG, TIMER, 32, [(1024, 128)], 64)
    assert first.ttft_mean > 3 * steady.ttft_mean


def test_a_lone_client_has_no_burst() -> None:
    first = first_wave(CONFIG, TIMER, 1, (1024, 128))
    steady = closed_loop(CONFIG, TIMER, 1, [(1024, 128)], 4)
    assert first.ttft_mean == pytest.approx(steady.ttft_mean, rel=0.05)


def test_non_mixed_waves_stay_synchronised_over_a_whole_benchmark() -> None:
    # SGLang's prefill batch takes the whole returning wave at once: every round is a burst.
    sglang = replace(CONFIG, mixed_prefill=False, block_size=1)
    first = first_wave(sglang, TIMER, 32, (1024, 128))
    whole = benchmark_loop(sglang, TIMER, 32, (1024, 128), rounds=4)
    assert whole.requests == 4 * 32
    assert whole.ttft_mean == pytest.approx(first.ttft_mean, rel=0.2)


def test_the_benchmark_mean_weighs_the_first_round_once() -> None:
    assert mean_of_rounds(2.0, 1.0, 20) == pytest.approx(1.05)
    assert mean_of_rounds(2.0, 1.0, 1) == pytest.approx(2.0)


def test_sglangs_separate_prefill_gives_lower_ttft_and_higher_itl_than_vllms_mixed_steps() -> None:
    # The same Poisson load of 1024-token prompts on the same step costs: SGLang (no mixed
    # chunk) runs a waiting prompt's prefill at once in its own batch while the decodes wait;
    # vLLM V1 feeds it to the running batch a token budget at a time alongside the decodes.
    budget = 256  # vLLM needs 4 mixed steps per prompt; SGLang one prefill batch
    mixed = replace(CONFIG, max_num_batched_tokens=budget)
    separate = replace(mixed, mixed_prefill=False, block_size=1)
    shapes = [(1024, 256)]
    vllm = open_loop(mixed, TIMER, 6.0, shapes, 200, seed=3)
    sglang = open_loop(separate, TIMER, 6.0, shapes, 200, seed=3)
    assert not vllm.saturated and not sglang.saturated
    assert sglang.ttft_p50 < vllm.ttft_p50
    assert sglang.itl_p50 > vllm.itl_p50
