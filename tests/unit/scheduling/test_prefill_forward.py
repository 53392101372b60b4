"""LazyScheduler.prefill_forward (a run of steps that each take one capped prefill chunk
next to the decoders) gives the eager scheduler's load runs to the bit, and it does run.

The configurations cap prompts into chunks with decoders beside them (vLLM's mixed steps),
with SGLang's separate prefill batches, with KV so tight that a chunk run must stop for a
preemption, and with pages of one token.
"""

from __future__ import annotations

import pytest

from tests.support.scheduler_runs import assert_lazy_runs_match, count_calls
from tests.support.step_timers import Roofline
from tokenfleet.scheduling.core import SchedulerConfig
from tokenfleet.scheduling.lazy import LazyScheduler

TIMER = Roofline(0.004, 2e-5, 1e-4, 1e-7, 1e-10)

CONFIGS = {
    "chunked-mixed": SchedulerConfig(400_000, 32, 256, 8192),
    "chunked-kv-bound": SchedulerConfig(20_000, 32, 256, 8192),
    "chunked-pages-of-one": SchedulerConfig(60_000, 16, 300, 4096, block_size=1),
    "prefill-batches": SchedulerConfig(60_000, 32, 256, 8192, mixed_prefill=False),
    "prefill-batches-kv-bound": SchedulerConfig(16_000, 32, 512, 8192, mixed_prefill=False),
}
SHAPES = [[(2000, 300)], [(1500, 40), (300, 200), (3000, 90)]]


@pytest.fixture
def chunk_runs(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Steps taken by prefill_forward, one entry per call that took any."""
    return count_calls(
        monkeypatch, LazyScheduler, "prefill_forward",
        lambda run: None if run is None else len(run.durations),
    )  # fmt: skip


@pytest.mark.parametrize("name", CONFIGS)
def test_chunk_runs_give_the_eager_runs_statistics(name: str, chunk_runs: list[int]) -> None:
    for shapes in SHAPES:
        assert_lazy_runs_match(CONFIGS[name], TIMER, shapes, clients=(1, 7, 40),
                               rates=(1.0, 8.0, 60.0), closed_requests=30, open_requests=60,
                               slo=(2.0, 0.05), give_ups=(None, 0.95))  # fmt: skip
    # The fast path ran, and took several steps at once.
    assert chunk_runs and max(chunk_runs) >= 3
