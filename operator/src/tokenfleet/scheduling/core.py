"""A continuous-batching scheduler modelled on vLLM's V1 scheduler, stepping a virtual clock.

It sits below both `tokenfleet.capacity` (plan() runs it in virtual time to predict latency
under load, scheduling/virtual.py) and `tokenfleet.sim` (which serves HTTP on top of it), so
imports keep pointing one way.

Pure logic, no I/O and no real clock: the caller (sim's engine.py, or simulate() below) decides
when a step starts and calls complete() when it has "run". One step is what one engine
forward pass does:

1. Running requests first, in admission order. Each gets the tokens it still has to compute
   (1 for a decoding request; the rest of its prompt for a prefilling one), capped by
   `long_prefill_token_threshold` while another request runs or waits, and by the step's
   token budget (`max_num_batched_tokens`: chunked prefill). If its KV blocks cannot
   be allocated, the NEWEST running request is preempted (recompute: its blocks are freed,
   its computed tokens forgotten, it goes back to the head of the waiting queue) until the
   allocation fits or the request preempted itself.
2. Then, only if nothing was preempted this step, waiting requests in FIFO order while the
   budget lasts and fewer than `max_num_seqs` run, each admitted only if the blocks for its
   (possibly chunked) prefill are free.
3. A request whose every known token has been computed samples one output token at the end
   of the step. It finishes at `max_tokens` (ignore_eos semantics) or at `max_model_len`.

KV is counted in blocks of `block_size` tokens (16, vLLM's default): a request holds
ceil(computed tokens / block_size) blocks. Two admission rules follow vLLM where its version
has them (SchedulerConfig):
- `reserve_full_sequence` (vLLM 0.32's scheduler_reserve_full_isl, on by default there): a
  waiting request is admitted only if its whole sequence fits the free blocks, not only its
  first chunk. Without it a long prompt admitted on its first chunk can run the cache out
  half-way, be preempted, come back and do it again: the thrash vLLM's option is there for.
- `prefix_caching` (vLLM V1's default): freed blocks stay in the prefix cache, in the free
  queue, until reused. Prompts are taken as unshared (no request hits another's blocks), but
  a preempted request, when it comes back, hits its own full blocks that no allocation has
  taken since (vLLM frees a request's blocks tail first and allocates from the queue's head,
  so the survivors are a prefix) and recomputes only the rest.
"""

from __future__ import annotations

import heapq
import math
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import NamedTuple, Protocol

from tokenfleet.scheduling.free_queue import FreeQueue, FreeRun


class StepTimer(Protocol):
    """What the scheduler needs from the capacity model's step_model(plan)."""

    def step_seconds(
        self,
        prefill_tokens: int,
        decode_seqs: int,
        decode_context_tokens: int,
        prefill_attention_pairs: float | None = None,
    ) -> float: ...


@dataclass(frozen=True)
class SchedulerConfig:
    kv_cache_tokens: int
    max_num_seqs: int
    max_num_batched_tokens: int
    max_model_len: int
    block_size: int = 16
    # vLLM V1 puts prefill chunks into the same step as the decodes. SGLang (without
    # --enable-mixed-chunk, its default) runs a prefill batch whenever it has prefill work and
    # the decodes wait for it: False (its scheduler's get_next_batch_to_run).
    mixed_prefill: bool = True
    # vLLM V1's --long-prefill-token-threshold: while more than one request is running or
    # waiting, no request computes more than this many tokens in one step, so a long
    # prompt's chunks leave budget to the requests behind it. 0: no cap (vLLM's default).
    long_prefill_token_threshold: int = 0
    # vLLM 0.32's --scheduler-reserve-full-isl (its default): admit a waiting request only if
    # its whole sequence fits the free blocks (KVCacheManager.allocate_slots'
    # full_sequence_must_fit). False: the first chunk's blocks are enough (older vLLM).
    reserve_full_sequence: bool = False
    # vLLM's --enable-prefix-caching (V1's default): a preempted request comes back with the
    # hit of its own blocks still cached (module docstring). Prompts are taken as unshared.
    prefix_caching: bool = False
    # SGLang's PrefillAdder (srt/managers/schedule_policy.py, 0.5.23): a waiting request is
    # admitted only if its prompt left to compute and its output fit the free tokens less
    # what every running request will still generate, each output counted up to
    # `output_reserve_clip` tokens (CLIP_MAX_NEW_TOKENS, 4096 by default). For fixed-length
    # requests (ignore_eos, every benchmark's) it counts the running ones' remaining outputs
    # in full (_get_running_request_total_token_offset: ratio 1.0), so below the clip
    # admission never overcommits and decode never has to retract.
    reserve_outputs: bool = False
    output_reserve_clip: int = 4096

    @property
    def num_blocks(self) -> int:
        return self.kv_cache_tokens // self.block_size

    def prefill_cap(self, eligible: int) -> int:
        """The most tokens one request may compute in a step with `eligible` requests running
        or waiting: vLLM 0.32's Scheduler.schedule applies the threshold only when
        num_running + num_waiting > 1 (alone, a request has nobody to starve)."""
        threshold = self.long_prefill_token_threshold
        if threshold > 0 and eligible > 1:
            return min(threshold, self.max_num_batched_tokens)
        return self.max_num_batched_tokens

    def outputs_fit(self, request: SimRequest, free_blocks: int, reserved: int) -> bool:
        """`reserve_outputs`: a waiting request's prompt left to compute and its whole
        output fit the free tokens less `reserved` (the running requests' remaining
        outputs)."""
        if not self.reserve_outputs or request.state != "waiting":
            return True
        out = request.output_tokens
        left = min(request.max_tokens - out, self.output_reserve_clip)
        need = request.prompt_tokens + out - request.num_computed + left
        return need <= free_blocks * self.block_size - reserved

    def piece_fits(self, request: SimRequest, budget: int, free_blocks: int) -> bool:
        """Whether a request's next prefill piece (at most `budget` tokens) fits the KV. For
        a waiting request under `reserve_full_sequence`, its whole sequence must fit too. (A
        prefix-cache hit of a preempted request's own blocks needs no fewer blocks: the hit
        blocks are taken from the free queue as well.)"""
        size = self.block_size
        if (
            self.reserve_full_sequence
            and request.state == "waiting"
            and -(-min(request.num_tokens, self.max_model_len) // size) - request.blocks
            > free_blocks
        ):
            return False
        new = min(request.num_tokens - request.num_computed, budget)
        return -(-(request.num_computed + new) // size) - request.blocks <= free_blocks


@dataclass(eq=False, slots=True)
class SimRequest:
    """One request's state; the timestamps are virtual (simulated) seconds. Slotted: plan()'s
    virtual runs make tens of thousands and read their fields on every event."""

    request_id: str
    prompt_tokens: int
    max_tokens: int
    arrival: float
    stream: bool = False  # only reported (SGLang labels metrics by it)
    state: str = "new"  # new | waiting | running | finished | aborted (O(1) membership)
    num_computed: int = 0
    output_tokens: int = 0
    blocks: int = 0
    num_preemptions: int = 0
    scheduled_at: float | None = None  # first time it was scheduled (end of queueing)
    first_token_at: float | None = None
    last_token_at: float | None = None
    finished_at: float | None = None
    token_times: list[float] = field(default_factory=list)
    # Preempted with prefix caching on: its full blocks in the free queue (Scheduler).
    cached: FreeRun[SimRequest] | None = None

    @property
    def num_tokens(self) -> int:
        """Prompt plus generated tokens: what a recompute after preemption must prefill."""
        return self.prompt_tokens + self.output_tokens

    @property
    def finished(self) -> bool:
        return self.finished_at is not None


# The three records below are NamedTuples, not frozen dataclasses: immutable all the same,
# and built four times faster (plan()'s virtual runs make one or two per event).
class ScheduledStep(NamedTuple):
    start: float
    duration: float
    work: tuple[tuple[SimRequest, int], ...]  # (request, tokens computed for it this step)
    prefill_tokens: int
    decode_seqs: int
    decode_context_tokens: int
    preempted: tuple[SimRequest, ...]

    @property
    def end(self) -> float:
        return self.start + self.duration

    @property
    def num_tokens(self) -> int:
        return self.prefill_tokens + self.decode_seqs


class FastForward(NamedTuple):
    """`steps` pure decode steps of `decode_seqs` sequences run at once (Scheduler.fast_forward)."""

    start: float
    end: float
    steps: int
    decode_seqs: int
    decode_context_tokens: int  # at the first of them
    first_duration: float
    last_duration: float
    finished: tuple[SimRequest, ...] = ()  # reached their last token in the last step


class StepOutcome(NamedTuple):
    end: float
    sampled: tuple[SimRequest, ...]  # requests that produced one output token this step
    finished: tuple[SimRequest, ...]


class Scheduler:
    def __init__(
        self, config: SchedulerConfig, timer: StepTimer, record_token_times: bool = True
    ) -> None:
        if config.num_blocks * config.block_size < config.max_model_len:
            raise ValueError(
                f"kv_cache_tokens={config.kv_cache_tokens} is smaller than "
                f"max_model_len={config.max_model_len}: one full-length request could never "
                "run; lower max_model_len or give the KV cache more memory"
            )
        self.config = config
        self.timer = timer
        self.waiting: deque[SimRequest] = deque()
        self._running: list[SimRequest] = []
        self.free_blocks = config.num_blocks
        self.num_preemptions = 0
        self.prefix_hit_tokens = 0  # recomputation a preempted request's own cache saved
        # Per-token timestamps cost memory and time; virtual runs for plan() skip them.
        self.record_token_times = record_token_times
        # The prefix cache's free queue (config.prefix_caching), in blocks.
        self._queue: FreeQueue[SimRequest] = FreeQueue()

    # A property, not a plain attribute, because LazyScheduler overrides it: compiled (mypyc),
    # this class's own reads of a plain attribute would skip the override.
    @property
    def running(self) -> list[SimRequest]:
        return self._running

    @running.setter
    def running(self, value: list[SimRequest]) -> None:
        self._running = value

    # -- state the metrics report ---------------------------------------------------------
    @property
    def kv_usage(self) -> float:
        """Fraction of KV blocks in use, 0..1 (vLLM's kv_cache_usage_perc)."""
        return 1.0 - self.free_blocks / self.config.num_blocks

    @property
    def used_tokens(self) -> int:
        return sum(r.num_computed for r in self.running)

    @property
    def idle(self) -> bool:
        return not self.waiting and not self.running

    # -- requests in and out ----------------------------------------------------------------
    def add(self, request: SimRequest) -> None:
        if request.prompt_tokens < 1 or request.max_tokens < 1:
            raise ValueError("a request needs at least one prompt token and one output token")
        request.state = "waiting"
        self.waiting.append(request)

    def abort(self, request: SimRequest) -> None:
        """Drop a request (client went away); frees its blocks. No-op if already gone."""
        if request.state == "running":
            self.running.remove(request)
            self._free(request)
        elif request.state == "waiting":
            self.waiting.remove(request)
            self._uncache(request)
        if request.state in ("running", "waiting"):
            request.state = "aborted"

    def _uncache(self, request: SimRequest) -> None:
        """A preempted request that is dropped never comes back for its cached prefix: its
        run in the free queue is blocks nobody will hit."""
        run = request.cached
        if run is not None:
            self._queue.disown(run)
            request.cached = None

    # -- one step ------------------------------------------------------------------------------
    def schedule(self, now: float) -> ScheduledStep | None:
        """Pick the work of the next step starting at `now`; None when there is none."""
        budget = self.config.max_num_batched_tokens
        work: list[tuple[SimRequest, int]] = []
        preempted: list[SimRequest] = []

        # The hot loop of plan()'s virtual runs: allocation and the decode/prefill split are
        # inlined (one pass per running request per step); preemption takes the slow path.
        size = self.config.block_size
        running = self.running
        cap = self.config.prefill_cap(len(running) + len(self.waiting))
        prefill = decode_seqs = decode_context = 0
        attention_pairs = 0.0  # per prefill piece: its own causal half plus earlier context
        # SGLang's policy: a step with prefill work to do is a prefill batch, decodes wait.
        prefill_only = not self.config.mixed_prefill and self._prefill_pending()
        index = 0
        while index < len(running) and budget > 0:
            request = running[index]
            computed = request.num_computed
            out = request.output_tokens
            total = request.prompt_tokens + out
            if prefill_only and out > 0 and computed == total - 1:
                index += 1
                continue
            new_tokens = total - computed
            if new_tokens > cap:
                new_tokens = cap
            if new_tokens > budget:
                new_tokens = budget
            needed = -(-(computed + new_tokens) // size) - request.blocks
            if needed > 0:
                if needed <= self.free_blocks:
                    self.free_blocks -= needed
                    request.blocks += needed
                else:
                    scheduled = True
                    while not self._allocate(request, new_tokens):
                        victim = running.pop()
                        self._preempt(victim)
                        preempted.append(victim)
                        if victim is request:
                            scheduled = False
                            break
                    if not scheduled:
                        break
                    computed = request.num_computed
            work.append((request, new_tokens))
            budget -= new_tokens
            if new_tokens == 1 and out > 0 and computed == total - 1:
                decode_seqs += 1
                decode_context += total
            else:
                prefill += new_tokens
                attention_pairs += new_tokens * new_tokens / 2 + new_tokens * computed
            index += 1

        if not preempted:
            while self.waiting and budget > 0 and len(self.running) < self.config.max_num_seqs:
                request = self.waiting[0]
                if not self.config.piece_fits(request, 0, self.free_blocks):
                    break  # reserve_full_sequence: its whole sequence does not fit
                if not self.config.outputs_fit(request, self.free_blocks, self.output_reserve()):
                    break  # reserve_outputs: the running requests' outputs need the room
                hit = self._hit_blocks(request) if request.cached is not None else 0
                start = request.num_computed + hit * size
                new_tokens = min(request.num_tokens - start, budget, cap)
                if -(-(start + new_tokens) // size) - request.blocks > self.free_blocks:
                    break
                if hit:
                    self._take_hit(request, hit)
                self._allocate(request, new_tokens)
                self.waiting.popleft()
                self.running.append(request)
                request.state = "running"
                if request.scheduled_at is None:
                    request.scheduled_at = now
                work.append((request, new_tokens))
                budget -= new_tokens
                # A newly admitted request prefills (or recomputes after preemption).
                prefill += new_tokens
                attention_pairs += new_tokens * new_tokens / 2 + new_tokens * request.num_computed

        if not work:
            return None
        duration = self.timer.step_seconds(prefill, decode_seqs, decode_context, attention_pairs)
        return ScheduledStep(
            now, duration, tuple(work), prefill, decode_seqs, decode_context, tuple(preempted)
        )

    def _prefill_pending(self) -> bool:
        """The first running request still prefilling can take its next piece, or (none
        prefilling) the first waiting one can be admitted. A piece that does not fit waits:
        the step decodes (and preempts, if the decodes need the blocks)."""
        cfg = self.config
        for request in self.running:
            if request.output_tokens == 0 or request.num_computed != request.num_tokens - 1:
                return cfg.piece_fits(request, cfg.max_num_batched_tokens, self.free_blocks)
        return bool(
            self.waiting
            and len(self.running) < cfg.max_num_seqs
            and self.head_fits(cfg.max_num_batched_tokens, self.free_blocks)
        )

    def head_fits(self, budget: int, free_blocks: int) -> bool:
        """Whether the head of the waiting queue would be admitted with `budget` tokens and
        `free_blocks` blocks: its piece, its whole sequence and its output reservation."""
        head = self.waiting[0]
        cfg = self.config
        return cfg.piece_fits(head, budget, free_blocks) and cfg.outputs_fit(
            head, free_blocks, self.output_reserve() if cfg.reserve_outputs else 0
        )

    def output_reserve(self) -> int:
        """Tokens the running requests will still generate, each up to the clip (SGLang's
        admission offset)."""
        clip = self.config.output_reserve_clip
        return sum(min(r.max_tokens - r.output_tokens, clip) for r in self.running)

    def complete(self, step: ScheduledStep) -> StepOutcome:
        """Apply a step's results at its end time: computed tokens, sampled tokens, finishes."""
        end = step.end
        sampled: list[SimRequest] = []
        finished: list[SimRequest] = []
        for request, tokens in step.work:
            if request.state != "running":
                continue  # aborted while the step ran
            request.num_computed += tokens
            if request.num_computed < request.prompt_tokens + request.output_tokens:
                continue  # a chunk of a longer prefill: no token yet
            request.output_tokens += 1
            if self.record_token_times:
                request.token_times.append(end)
            if request.first_token_at is None:
                request.first_token_at = end
            request.last_token_at = end
            sampled.append(request)
            if (
                request.output_tokens >= request.max_tokens
                or request.prompt_tokens + request.output_tokens >= self.config.max_model_len
            ):
                request.finished_at = end
                request.state = "finished"
                self._free(request)
                finished.append(request)
        if finished:  # one pass, not a list.remove per request: thousands may run
            self.running = [r for r in self.running if r.state == "running"]
        return StepOutcome(end, tuple(sampled), tuple(finished))

    # -- many decode steps at once -------------------------------------------------------------
    def fast_forward(self, now: float, until: float | None = None) -> FastForward | None:
        """Run the next steps at once while they are pure decode steps over the same running
        set: nobody prefills, nobody can be admitted, nobody finishes before the last of them
        (those finishing in it are returned), no preemption, and (if `until` is given) no
        step starts at or after `until` (the next arrival). Each such step
        would give every running request one token; doing k of them in one call is what makes
        a virtual run of hundreds of requests cheap. Returns None when the next step must go
        through schedule(). Step times are interpolated linearly in the decode context (exact
        while the step stays on one side of the memory/compute roofline)."""
        running = self.running
        n = len(running)
        cfg = self.config
        if not n or n > cfg.max_num_batched_tokens:
            return None
        if self.waiting and n < cfg.max_num_seqs:
            # Mixed steps give the head what the decodes leave; SGLang's prefill batch all.
            budget = cfg.max_num_batched_tokens - (n if cfg.mixed_prefill else 0)
            budget = min(budget, cfg.prefill_cap(n + len(self.waiting)))
            if self.head_fits(budget, self.free_blocks):
                return None  # it would be admitted now
        steps = max_len = cfg.max_model_len
        context = 0
        for request in running:  # plain comparisons: this loop is the hot path of plan()
            out = request.output_tokens
            total = request.prompt_tokens + out
            if request.num_computed != total - 1 or out == 0:
                return None  # a prefill (or a recompute) in progress
            left = request.max_tokens - out
            if left < steps:
                steps = left
            if max_len - total < steps:
                steps = max_len - total
            context += total
        if steps < 2:
            return None  # the next step finishes someone: complete() handles it
        size = cfg.block_size
        needed = sum(-(-(r.num_computed + steps) // size) - r.blocks for r in running)
        if needed > self.free_blocks:
            return None  # preemption ahead: step one at a time
        first = self.timer.step_seconds(0, n, context)
        last = self.timer.step_seconds(0, n, context + (steps - 1) * n)
        slope = (last - first) / (steps - 1)
        if until is not None:
            # Smallest m whose m steps end at or after `until`: the step after them would
            # start after the arrival, which must be admitted first.
            room = until - now
            if room <= 0:
                return None
            a, b = slope / 2, first - slope / 2
            m = room / first if a <= 1e-15 else (-b + math.sqrt(b * b + 4 * a * room)) / (2 * a)
            steps = min(steps, max(math.ceil(m - 1e-9), 1))
            if steps < 2:
                return None
            last = first + slope * (steps - 1)
        duration = steps * (first + last) / 2
        end = now + duration
        for request in running:
            if self.record_token_times:
                request.token_times.extend(
                    now + j * first + slope * j * (j - 1) / 2 for j in range(1, steps + 1)
                )
            request.num_computed += steps
            request.output_tokens += steps
            blocks = -(-request.num_computed // size)
            self.free_blocks -= blocks - request.blocks
            request.blocks = blocks
            request.last_token_at = end
        # Whoever reached max_tokens (or max_model_len) in the last of these steps finishes
        # at its end, exactly as complete() would have done.
        finished = tuple(
            r for r in running if r.output_tokens >= r.max_tokens or r.num_tokens >= max_len
        )
        for request in finished:
            request.finished_at = end
            request.state = "finished"
            self._free(request)
        if finished:
            self.running = [r for r in running if r.state == "running"]
        return FastForward(now, end, steps, n, context, first, last, finished)

    # -- KV blocks -----------------------------------------------------------------------------
    def _allocate(self, request: SimRequest, new_tokens: int) -> bool:
        size = self.config.block_size
        needed = -(-(request.num_computed + new_tokens) // size) - request.blocks
        if needed > self.free_blocks:
            return False
        if needed > 0:
            self.free_blocks -= needed
            request.blocks += needed
        return True

    def _free(self, request: SimRequest) -> None:
        self.free_blocks += request.blocks
        if self._queue.live:
            self._queue.append(None, request.blocks)
        request.blocks = 0

    def _preempt(self, request: SimRequest) -> None:
        if self.config.prefix_caching:
            queue = self._queue
            if not queue.live:  # the queue starts over: every free block is alike so far
                queue.restart(self.free_blocks)
            # Freed tail first: the blocks past the computed prefix, then its full blocks
            # from the last to the first, which so outlive the others in the queue.
            full = min(request.num_computed // self.config.block_size, request.blocks)
            self.free_blocks += request.blocks
            queue.append(None, request.blocks - full)
            request.cached = queue.append(request, full)
            request.blocks = 0
        else:
            self._free(request)
        request.num_computed = 0
        request.num_preemptions += 1
        request.state = "waiting"
        self.num_preemptions += 1
        self.waiting.appendleft(request)

    # -- the prefix cache's free queue (config.prefix_caching) ------------------------------
    def _settle(self) -> None:
        for run in self._queue.settle(self.free_blocks):
            owner = run.owner
            if owner is not None and owner.cached is run:
                owner.cached = None

    def _hit_blocks(self, request: SimRequest) -> int:
        """Blocks of a preempted request's own prefix still in the cache: vLLM's hit, at most
        num_tokens - 1 tokens (one must be computed for the logits)."""
        self._settle()
        run = request.cached
        if run is None:
            return 0
        cap = (request.num_tokens - 1) // self.config.block_size
        return run.count if run.count < cap else cap

    def _take_hit(self, request: SimRequest, hit: int) -> None:
        run = request.cached
        assert run is not None
        self._queue.take_hit(run, hit)
        request.cached = None
        self.free_blocks -= hit
        request.blocks = hit
        request.num_computed = hit * self.config.block_size
        self.prefix_hit_tokens += request.num_computed


@dataclass(frozen=True)
class Arrival:
    at: float
    prompt_tokens: int
    max_tokens: int


def simulate(
    config: SchedulerConfig, timer: StepTimer, arrivals: Iterable[Arrival]
) -> list[SimRequest]:
    """Run arrivals through a scheduler on a virtual clock until all finish (for tests and
    benchmarks of the model itself). Returns the requests in arrival order."""
    scheduler = Scheduler(config, timer)
    pending: list[tuple[float, int, SimRequest]] = []
    requests: list[SimRequest] = []
    for index, arrival in enumerate(arrivals):
        request = SimRequest(f"req-{index}", arrival.prompt_tokens, arrival.max_tokens, arrival.at)
        requests.append(request)
        heapq.heappush(pending, (arrival.at, index, request))
    now = 0.0
    while pending or not scheduler.idle:
        while pending and pending[0][0] <= now:
            scheduler.add(heapq.heappop(pending)[2])
        step = scheduler.schedule(now)
        if step is None:
            if not pending:
                break  # nothing runnable and nothing coming: cannot happen with valid config
            now = pending[0][0]
            continue
        now = scheduler.complete(step).end
    return requests
