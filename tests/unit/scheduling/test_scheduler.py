"""The simulator's continuous-batching scheduler, on a virtual clock with a linear step timer."""

from __future__ import annotations

import pytest

from tests.support.step_timers import Roofline
from tokenfleet.scheduling.core import (
    Arrival,
    Scheduler,
    SchedulerConfig,
    SimRequest,
    simulate,
)

# A stand-in step model: fixed overhead + per prefill token + per decode context token.
LINEAR = Roofline(overhead=0.010, per_prefill_token=0.0001, per_context_token=0.000001)


def config(
    kv: int = 16 * 1024, seqs: int = 256, batched: int = 2048, max_len: int = 1024
) -> SchedulerConfig:
    return SchedulerConfig(
        kv_cache_tokens=kv, max_num_seqs=seqs, max_num_batched_tokens=batched, max_model_len=max_len
    )


def request(name: str, prompt: int, out: int, at: float = 0.0) -> SimRequest:
    return SimRequest(name, prompt, out, at)


@pytest.mark.parametrize(
    ("case", "cfg", "prompts", "running", "waiting"),
    [
        # 4 blocks of KV; each 40-token prompt needs 3 blocks: only one fits.
        ("kv admits one", config(kv=64, max_len=64), [40, 40], 1, 1),
        # 8 blocks: two 40-token prompts (3 blocks each) fit, the third does not.
        ("kv admits two", config(kv=128, max_len=128), [40, 40, 40], 2, 1),
        ("max_num_seqs", config(seqs=2), [10, 10, 10, 10], 2, 2),
        # The token budget runs out: the first prompt takes 100 of 120, the second gets a
        # 20-token chunk, the third waits for the next step.
        ("token budget", config(batched=120), [100, 100, 100], 2, 1),
    ],
)
def test_admission_limits(
    case: str, cfg: SchedulerConfig, prompts: list[int], running: int, waiting: int
) -> None:
    scheduler = Scheduler(cfg, LINEAR)
    for index, prompt in enumerate(prompts):
        scheduler.add(request(f"r{index}", prompt, 4))
    step = scheduler.schedule(0.0)
    assert step is not None
    assert (len(scheduler.running), len(scheduler.waiting)) == (running, waiting), case


@pytest.mark.parametrize(
    ("prompt", "batched", "chunks"),
    [
        (250, 100, [100, 100, 50]),
        (100, 100, [100]),
        (101, 100, [100, 1]),
        (10, 2048, [10]),
    ],
)
def test_chunked_prefill_splits_a_long_prompt(prompt: int, batched: int, chunks: list[int]) -> None:
    scheduler = Scheduler(config(batched=batched), LINEAR)
    req = request("r", prompt, 3)
    scheduler.add(req)
    seen = []
    now = 0.0
    while req.first_token_at is None:
        step = scheduler.schedule(now)
        assert step is not None
        seen.append(step.prefill_tokens)
        now = scheduler.complete(step).end
    assert seen == chunks
    assert req.output_tokens == 1


def test_decodes_are_scheduled_before_new_prefill() -> None:
    scheduler = Scheduler(config(batched=64), LINEAR)
    old = request("old", 16, 10)
    scheduler.add(old)
    first = scheduler.schedule(0.0)
    assert first is not None
    scheduler.complete(first)  # old has its first token and now decodes
    new = request("new", 200, 5)
    scheduler.add(new)
    step = scheduler.schedule(first.end)
    assert step is not None
    assert (step.decode_seqs, step.prefill_tokens) == (1, 63)
    assert step.decode_context_tokens == old.num_tokens
    assert [(r.request_id, n) for r, n in step.work] == [("old", 1), ("new", 63)]


def two_that_cannot_both_finish() -> tuple[Scheduler, SimRequest, SimRequest]:
    """6 blocks = 96 tokens. Two requests of 30-token prompts each grow to 30 + 40 = 70
    tokens (5 blocks): both are admitted (2 blocks each) but cannot both finish."""
    scheduler = Scheduler(config(kv=96, max_len=96), LINEAR)
    older, newer = request("older", 30, 40), request("newer", 30, 40)
    scheduler.add(older)
    scheduler.add(newer)
    return scheduler, older, newer


def test_preemption_recomputes_the_newest_request_when_kv_runs_out() -> None:
    scheduler, older, newer = two_that_cannot_both_finish()
    now = 0.0
    preempted: list[str] = []
    while not scheduler.idle:
        step = scheduler.schedule(now)
        assert step is not None
        preempted += [r.request_id for r in step.preempted]
        assert scheduler.free_blocks >= 0
        now = scheduler.complete(step).end
    assert preempted and set(preempted) == {"newer"}
    assert scheduler.num_preemptions == len(preempted)
    assert (older.output_tokens, newer.output_tokens) == (40, 40)
    assert older.num_preemptions == 0
    assert newer.finished_at is not None and older.finished_at is not None
    assert newer.finished_at > older.finished_at
    assert scheduler.free_blocks == 6


def test_preempted_request_recomputes_prompt_and_generated_tokens() -> None:
    scheduler, _, newer = two_that_cannot_both_finish()
    now = 0.0
    while True:
        step = scheduler.schedule(now)
        assert step is not None
        if step.preempted:
            break
        now = scheduler.complete(step).end
    generated = newer.output_tokens
    assert generated > 0 and newer.num_computed == 0 and newer.blocks == 0
    assert scheduler.waiting[0] is newer
    # When it comes back, the whole prompt plus what it had generated is prefilled again.
    while newer in scheduler.waiting:
        now = scheduler.complete(step).end
        step = scheduler.schedule(now)
        assert step is not None
    assert dict((r.request_id, n) for r, n in step.work)["newer"] == 30 + generated


@pytest.mark.parametrize("seqs", [1, 2, 4])
def test_queueing_raises_ttft(seqs: int) -> None:
    arrivals = [Arrival(0.0, 500, 20) for _ in range(8)]
    alone = simulate(config(seqs=seqs), LINEAR, arrivals[:1])[0]
    crowd = simulate(config(seqs=seqs), LINEAR, arrivals)
    assert alone.first_token_at is not None
    ttfts = [r.first_token_at - r.arrival for r in crowd if r.first_token_at is not None]
    assert len(ttfts) == 8
    assert ttfts == sorted(ttfts)
    assert ttfts[-1] > 2 * (alone.first_token_at - alone.arrival)
    queue_times = [r.scheduled_at - r.arrival for r in crowd if r.scheduled_at is not None]
    assert queue_times[0] == 0.0 and queue_times[-1] > 0.0


@pytest.mark.parametrize(
    ("prompt", "max_tokens", "max_len", "expected"),
    [(10, 5, 1024, 5), (10, 100, 20, 10), (1, 1, 16, 1)],
)
def test_output_length_is_max_tokens_or_context_limit(
    prompt: int, max_tokens: int, max_len: int, expected: int
) -> None:
    (req,) = simulate(config(max_len=max_len), LINEAR, [Arrival(0.0, prompt, max_tokens)])
    assert req.output_tokens == expected
    assert len(req.token_times) == expected
    assert req.token_times == sorted(req.token_times)


def test_decode_step_times_follow_the_timer() -> None:
    timer = LINEAR
    (req,) = simulate(config(), timer, [Arrival(0.0, 100, 4)])
    assert req.first_token_at == pytest.approx(timer.step_seconds(100, 0, 0))
    gaps = [b - a for a, b in zip(req.token_times, req.token_times[1:], strict=False)]
    assert gaps == pytest.approx([timer.step_seconds(0, 1, 101 + i) for i in range(3)])


def test_abort_frees_blocks_and_forgets_the_request() -> None:
    scheduler = Scheduler(config(kv=256, max_len=256), LINEAR)
    a, b = request("a", 40, 10), request("b", 40, 10)
    scheduler.add(a)
    scheduler.add(b)
    step = scheduler.schedule(0.0)
    assert step is not None
    scheduler.abort(a)
    outcome = scheduler.complete(step)
    assert [r.request_id for r in outcome.sampled] == ["b"]
    assert scheduler.free_blocks == 16 - 3
    scheduler.abort(b)
    assert scheduler.idle and scheduler.free_blocks == 16


def test_kv_smaller_than_max_model_len_is_refused() -> None:
    with pytest.raises(ValueError, match=r"kv_cache_tokens=64 .* max_model_len=128"):
        Scheduler(config(kv=64, max_len=128), LINEAR)


def test_same_arrivals_give_the_same_timeline() -> None:
    arrivals = [Arrival(i * 0.01, 50 + 7 * i, 10 + i) for i in range(20)]
    first = simulate(config(kv=512, seqs=4, max_len=512), LINEAR, arrivals)
    second = simulate(config(kv=512, seqs=4, max_len=512), LINEAR, arrivals)
    assert [r.token_times for r in first] == [r.token_times for r in second]


def test_an_aborted_preempted_request_leaves_no_cached_prefix_behind() -> None:
    """With prefix caching a preempted request's blocks wait in the free queue for it; once
    the client goes away nobody will hit them (the simulator aborts on disconnect)."""
    cfg = SchedulerConfig(
        kv_cache_tokens=64, max_num_seqs=4, max_num_batched_tokens=64, max_model_len=64,
        prefix_caching=True,
    )  # fmt: skip
    scheduler = Scheduler(cfg, LINEAR)
    a, b = request("a", 24, 30), request("b", 24, 30)
    scheduler.add(a)
    scheduler.add(b)
    now = 0.0
    while not b.num_preemptions:
        step = scheduler.schedule(now)
        assert step is not None
        now = scheduler.complete(step).end
    assert b.state == "waiting" and b.cached is not None
    scheduler.abort(b)
    assert b.state == "aborted" and b.cached is None
    while not scheduler.idle:
        step = scheduler.schedule(now)
        assert step is not None
        now = scheduler.complete(step).end
    assert a.finished and a.output_tokens == 30
