"""SGLang's admission (PrefillAdder, sglang 0.5.23 srt/managers/schedule_policy.py), as the
scheduler core models it: a waiting request is admitted only if its prompt left to compute
and its whole output fit the free tokens less every running request's remaining output
(fixed-length requests: _get_running_request_total_token_offset counts them at ratio 1.0).
vLLM checks only the blocks of the step's chunk (or, from 0.32, of the whole sequence so
far), and preempts when the outputs outgrow the cache."""

from __future__ import annotations

import pytest

from tests.support.step_timers import Roofline
from tokenfleet.scheduling.core import Scheduler, SchedulerConfig, SimRequest

TIMER = Roofline(0.01, 1e-5, 1e-4)


@pytest.mark.parametrize(
    "prompt,output,computed,free_tokens,reserved,admitted",
    [
        (1000, 1000, 0, 2000, 0, True),  # prompt + output exactly fit
        (1000, 1000, 0, 1999, 0, False),
        (1000, 1000, 0, 5000, 3000, True),  # the running ones' remaining outputs count
        (1000, 1000, 0, 5000, 3001, False),
        (1000, 1000, 600, 1400, 0, True),  # a preempted request's computed part is back
        (100, 8000, 0, 4196, 0, True),  # outputs count up to CLIP_MAX_NEW_TOKENS (4096)
        (100, 8000, 0, 4195, 0, False),
    ],
)
def test_a_waiting_request_needs_its_prompt_and_output_beside_the_running_outputs(
    prompt: int, output: int, computed: int, free_tokens: int, reserved: int, admitted: bool
) -> None:
    config = SchedulerConfig(50_000, 64, 8192, 8192, block_size=1, reserve_outputs=True)
    request = SimRequest("r", prompt, output, 0.0, state="waiting", num_computed=computed)
    assert config.outputs_fit(request, free_tokens, reserved) is admitted
    # A running request is never held back by the reservation (it was admitted with it).
    request.state = "running"
    assert config.outputs_fit(request, 0, reserved)


def run(config: SchedulerConfig, n: int) -> tuple[int, int]:
    """(most requests running at once, preemptions) for n requests sent together."""
    scheduler = Scheduler(config, TIMER, record_token_times=False)
    for i in range(n):
        scheduler.add(SimRequest(f"r{i}", 1000, 1000, 0.0))
    most, now = 0, 0.0
    while not scheduler.idle:
        step = scheduler.schedule(now)
        assert step is not None
        now = scheduler.complete(step).end
        most = max(most, len(scheduler.running))
    return most, scheduler.num_preemptions


def test_sglang_runs_what_the_outputs_leave_room_for_and_never_retracts() -> None:
    # 10,000 tokens of KV, requests of 1,000 + 1,000: SGLang admits five (each reserves
    # 2,000); vLLM admits on the prompt's blocks, runs more and preempts as outputs grow.
    sglang = SchedulerConfig(10_000, 64, 8192, 2000, block_size=1, mixed_prefill=False,
                             reserve_outputs=True)  # fmt: skip
    vllm = SchedulerConfig(10_000, 64, 8192, 2000, block_size=16)
    assert run(sglang, 12) == (5, 0)
    most, preemptions = run(vllm, 12)
    assert most > 5 and preemptions > 0
