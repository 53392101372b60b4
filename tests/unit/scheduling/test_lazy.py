"""The lazy scheduler (plan()'s virtual runs) takes the eager scheduler's decisions exactly.

Both are driven through the same arrivals, with fast-forward, on configurations that reach
every path: plain decode, chunked prefill cut by the token budget, a budget below the batch
cap, KV exhaustion (preemption and recompute), max_model_len caps, block size 1 (SGLang's
pages), prefill batches the decodes wait for (SGLang's policy). Every request's timestamps
must be identical, and so
must the load runs' statistics.
"""

from __future__ import annotations

import pytest

from tests.support.scheduler_runs import assert_lazy_runs_match, drive
from tests.support.step_timers import Roofline
from tokenfleet.scheduling.core import Scheduler, SchedulerConfig, SimRequest
from tokenfleet.scheduling.lazy import LazyScheduler

TIMER = Roofline(0.004, 2e-5, 1e-4, 1e-7, 1e-10)

CONFIGS = {
    "roomy": SchedulerConfig(400_000, 64, 1024, 4096),
    "kv-bound": SchedulerConfig(12_000, 64, 2048, 4096),
    "small-budget": SchedulerConfig(100_000, 64, 48, 2048),  # budget < max-num-seqs
    "pages-of-one": SchedulerConfig(9_000, 16, 8192, 1000, block_size=1),
    # SGLang's policy: prefill batches apart from decode ones.
    "prefill-batches": SchedulerConfig(60_000, 64, 2048, 4096, block_size=1, mixed_prefill=False),
    "prefill-batches-kv-bound": SchedulerConfig(12_000, 64, 1024, 4096, mixed_prefill=False),
    # vLLM's --long-prefill-token-threshold: long prompts' chunks capped beside others.
    "long-prefill-threshold": SchedulerConfig(
        400_000, 64, 1024, 4096, long_prefill_token_threshold=256
    ),
    "long-prefill-threshold-kv-bound": SchedulerConfig(
        12_000, 64, 2048, 4096, long_prefill_token_threshold=512
    ),
    # vLLM 0.32's admission (whole sequence must fit) and V1's prefix cache, where a
    # preempted request comes back with its own surviving blocks.
    "kv-bound-whole-sequence": SchedulerConfig(12_000, 64, 512, 4096, reserve_full_sequence=True),
    "kv-bound-prefix-cache": SchedulerConfig(12_000, 64, 512, 4096, prefix_caching=True),
    "kv-bound-both": SchedulerConfig(
        12_000, 64, 512, 4096, reserve_full_sequence=True, prefix_caching=True
    ),
    # SGLang's admission: a request's whole output and the running ones' remaining outputs
    # must fit, beside prefill batches the decodes wait for (and with mixed chunks).
    "sglang-reserve": SchedulerConfig(
        9_000, 64, 2048, 4096, block_size=1, mixed_prefill=False, reserve_outputs=True
    ),
    "sglang-reserve-pages": SchedulerConfig(
        12_000, 64, 1024, 4096, block_size=16, mixed_prefill=False, reserve_outputs=True
    ),
    "mixed-reserve": SchedulerConfig(9_000, 64, 512, 4096, block_size=1, reserve_outputs=True),
    # Outputs longer than the clip count the clip until they fall below it.
    "sglang-reserve-clipped": SchedulerConfig(
        9_000,
        64,
        2048,
        4096,
        block_size=1,
        mixed_prefill=False,
        reserve_outputs=True,
        output_reserve_clip=300,
    ),
}
SHAPES = [(100, 50), (700, 400), (30, 5), (1500, 300), (12, 600)]


@pytest.mark.parametrize("gap", [0.02, 0.0])  # spaced arrivals, or one burst
@pytest.mark.parametrize("name", CONFIGS)
def test_every_request_sees_the_same_times(name: str, gap: float) -> None:
    config = CONFIGS[name]
    shapes = [(p, o) for p, o in SHAPES if p + o <= config.max_model_len + 200]
    arrivals = [(gap * i, *shapes[(i * 7) % len(shapes)]) for i in range(120)]
    eager = Scheduler(config, TIMER, record_token_times=False)
    lazy = LazyScheduler(config, TIMER)
    expected, got = drive(eager, arrivals), drive(lazy, arrivals)
    for a, b in zip(expected, got, strict=True):
        assert (b.output_tokens, b.num_preemptions) == (a.output_tokens, a.num_preemptions)
        assert (b.scheduled_at, b.first_token_at) == (a.scheduled_at, a.first_token_at)
        assert (b.last_token_at, b.finished_at) == (a.last_token_at, a.finished_at)
    assert lazy.num_preemptions == eager.num_preemptions
    assert lazy.free_blocks == config.num_blocks  # every block came back
    if name == "kv-bound":  # the eager fallback ran, for preemption
        assert eager.num_preemptions > 0 and lazy.eager_steps > 0
    if name in ("sglang-reserve", "sglang-reserve-pages"):  # no retraction below the clip
        assert eager.num_preemptions == 0
    if name == "kv-bound-prefix-cache":  # preempted requests came back with their hits
        assert eager.prefix_hit_tokens > 0
        assert lazy.prefix_hit_tokens == eager.prefix_hit_tokens
    if name == "roomy":  # the lazy path alone
        assert eager.num_preemptions == 0 and lazy.eager_steps == 0


@pytest.mark.parametrize("name", CONFIGS)
def test_load_runs_report_the_same_statistics(name: str) -> None:
    config = CONFIGS[name]
    for shapes in ([(300, 100)], [(100, 50), (700, 400), (30, 5)]):
        assert_lazy_runs_match(config, TIMER, shapes, clients=(1, 9, 80), rates=(2.0, 30.0, 200.0),
                               closed_requests=30, open_requests=80, slo=(1.0, 0.05),
                               give_ups=(None, 0.95), offline_requests=50)  # fmt: skip


def test_reading_the_running_set_brings_decoders_up_to_date() -> None:
    config = CONFIGS["roomy"]
    states = []
    for scheduler in (
        Scheduler(config, TIMER, record_token_times=False),
        LazyScheduler(config, TIMER),
    ):
        for i, out in enumerate((50, 80, 120)):
            scheduler.add(SimRequest(f"r{i}", 100, out, 0.0))
        now = scheduler.complete(scheduler.schedule(0.0)).end  # type: ignore[arg-type]
        jump = scheduler.fast_forward(now, until=now + 0.1)  # stops part-way
        assert jump is not None and jump.steps < 49
        # Reading the set mid-decode: the lazy one materialises its decoders' counters,
        # and decoding goes on from there exactly as before.
        seen = [(r.output_tokens, r.num_computed, r.blocks) for r in scheduler.running]
        now = jump.end
        while not scheduler.idle:
            step = scheduler.fast_forward(now)
            now = step.end if step else scheduler.complete(scheduler.schedule(now)).end  # type: ignore[arg-type]
        states.append((seen, now, scheduler.free_blocks))
    assert states[0] == states[1]
    assert states[1][0][0][0] > 1  # they had decoded a few tokens when read


def test_aborting_a_decoder_frees_its_blocks_and_leaves_the_others_on_time() -> None:
    config = CONFIGS["roomy"]
    arrivals = [(0.0, 100, 50), (0.0, 120, 60), (0.0, 140, 70)]
    eager = Scheduler(config, TIMER, record_token_times=False)
    lazy = LazyScheduler(config, TIMER)
    done = []
    for scheduler in (eager, lazy):
        requests = [SimRequest(f"r{i}", p, o, at) for i, (at, p, o) in enumerate(arrivals)]
        for request in requests:
            scheduler.add(request)
        now = 0.0
        for _ in range(10):  # prefill, then nine decode steps one by one
            now = scheduler.complete(scheduler.schedule(now)).end  # type: ignore[arg-type]
        scheduler.abort(requests[1])
        assert requests[1].state == "aborted" and requests[1].output_tokens == 10
        while not scheduler.idle:
            jump = scheduler.fast_forward(now)
            if jump is not None:
                now = jump.end
                continue
            now = scheduler.complete(scheduler.schedule(now)).end  # type: ignore[arg-type]
        assert scheduler.free_blocks == config.num_blocks
        done.append([(r.finished_at, r.output_tokens) for r in requests])
    assert done[0] == done[1]
