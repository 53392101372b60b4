"""LazyScheduler.fast_forward also takes a single decode step (a finish or an arrival due
next), where Scheduler.fast_forward leaves it to schedule(): the load runs are the eager
ones to the bit, SGLang's policy included (there schedule() may still admit the queue's
head beside the decoders when a whole prefill batch does not fit)."""

from __future__ import annotations

import pytest

from tests.support.scheduler_runs import assert_lazy_runs_match, count_calls
from tests.support.step_timers import Roofline
from tokenfleet.scheduling.core import SchedulerConfig
from tokenfleet.scheduling.lazy import LazyScheduler

TIMER = Roofline(0.003, 3e-5, 2e-4, 3e-8, 1e-10, context_power=1.2)

CONFIGS = {
    "mixed": SchedulerConfig(200_000, 48, 2048, 8192),
    "mixed-kv-bound": SchedulerConfig(14_000, 48, 2048, 8192),
    "prefill-batches": SchedulerConfig(40_000, 48, 1024, 8192, mixed_prefill=False),
    "prefill-batches-kv-bound": SchedulerConfig(
        9_000, 48, 2048, 4096, block_size=1, mixed_prefill=False
    ),
}
SHAPES = [[(600, 80)], [(900, 30), (200, 150), (1800, 60), (50, 7)]]


@pytest.fixture
def single_steps(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """One entry per fast_forward jump of a single step."""
    return count_calls(
        monkeypatch, LazyScheduler, "fast_forward",
        lambda jump: 1 if jump is not None and jump.steps == 1 else None,
    )  # fmt: skip


@pytest.mark.parametrize("name", CONFIGS)
def test_single_steps_give_the_eager_runs_statistics(name: str, single_steps: list[int]) -> None:
    for shapes in SHAPES:
        assert_lazy_runs_match(CONFIGS[name], TIMER, shapes, clients=(1, 5, 30, 90),
                               rates=(0.5, 6.0, 40.0, 300.0), closed_requests=40,
                               open_requests=90, slo=(1.5, 0.02))  # fmt: skip
    assert len(single_steps) > 20
