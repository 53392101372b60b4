"""One modelled replica for `tokenfleet autoscale-sim`: the engine's continuous batching, fast.

The step-by-step scheduler in `tokenfleet.scheduling.core` costs O(batch) Python work per
engine step; a 30-minute trace at tens of req/s is millions of steps per policy (minutes).
This model makes the same per-step decisions in aggregate and charges every step with the
capacity model's step timer (`StepModel.step_seconds`), so it stays within a few percent of
the scheduler (the unit test test_fleetsim_replica.py compares them) at about one
loop iteration per request event instead of one per step:

- Running requests first: each decoding request gets one token per step; the rest of the
  `max_num_batched_tokens` budget goes to prompts being prefilled, oldest first (chunked
  prefill), each at most `long_prefill_token_threshold` tokens while another request runs
  or waits; waiting requests are admitted FIFO while fewer than `max_num_seqs` run.
  SGLang (`mixed_prefill` off) runs a prefill batch whenever it has prefill work, the
  decodes waiting for it.
- Admission follows the engine version's rules, the scheduler core's (SchedulerConfig, as
  plan() runs them): the first chunk's KV must be free (vLLM), the whole sequence's too
  (`reserve_full_sequence`, vLLM 0.32), or the prompt and the output beside every running
  request's remaining output (`reserve_outputs`, SGLang). KV grows as requests compute;
  when a step's work does not fit, the newest running request is preempted (recompute) to
  the head of the queue, and with `prefix_caching` it comes back with the hit of its own
  blocks that no allocation has taken since (the core's free queue, counted in tokens).
- A stretch of pure-decode steps (nothing to prefill, nothing admissible) is advanced in
  one go, up to the next finishing request, the KV running out or the caller's time bound;
  decode contexts are tracked as one sum and the decoders' KV blocks by the step each
  needs its next one at (the lazy scheduler's phases), so a stretch costs O(block_size)
  however large the batch.
"""

from __future__ import annotations

import heapq
import math
from collections import deque
from dataclasses import dataclass

from tokenfleet.autoscale.fleetsim.prefix import BLOCK_TOKENS, PrefixCache
from tokenfleet.scheduling.core import SchedulerConfig, StepTimer
from tokenfleet.scheduling.free_queue import FreeQueue, FreeRun


@dataclass(eq=False)
class FleetRequest:
    """One request's life in the modelled fleet; times in simulated seconds."""

    arrival: float
    prompt: int
    output: int
    first_token_at: float | None = None
    finished_at: float | None = None
    replica: int = -1
    scheduled_at: float | None = None  # admitted to the running batch: the end of its queue wait
    blocks: tuple[int, ...] = ()  # the trace's prefix block ids (fleetsim.prefix)
    cached: int = 0  # prompt tokens served from the replica's prefix cache
    done: int = 0  # output tokens so far (kept across a preemption; current while it waits)
    preemptions: int = 0

    @property
    def queue_wait(self) -> float:
        """What vllm:request_queue_time_seconds observes: arrival to admission."""
        return (self.scheduled_at if self.scheduled_at is not None else self.arrival) - self.arrival

    @property
    def ttft(self) -> float:
        assert self.first_token_at is not None
        return self.first_token_at - self.arrival

    @property
    def tpot(self) -> float:
        """(e2e - ttft) / (output - 1), as `vllm bench serve`; 0 for one-token outputs."""
        assert self.first_token_at is not None and self.finished_at is not None
        if self.output <= 1:
            return 0.0
        return (self.finished_at - self.first_token_at) / (self.output - 1)


@dataclass(eq=False)
class _Prefill:
    request: FleetRequest
    computed: int  # tokens in its KV (a prefix hit included)
    order: int  # admission order: the newest running request is preempted first

    @property
    def left(self) -> int:
        """Tokens to compute before it samples: its prompt and, after a preemption, the
        outputs it had (a recompute)."""
        return self.request.prompt + self.request.done - self.computed


class FastReplica:
    """Event-driven continuous batching over the step model (see the module docstring)."""

    def __init__(self, config: SchedulerConfig, timer: StepTimer, start: float = 0.0) -> None:
        self.config = config
        self.timer = timer
        self.now = start  # end of the last step (the replica's own clock)
        self.waiting: deque[FleetRequest] = deque()
        self.prefilling: deque[_Prefill] = deque()
        self.decoding: list[tuple[int, int, FleetRequest]] = []  # (finish step, order, request)
        self.steps = 0  # decode steps so far: every decoding request gains one token per step
        self.context_base = 0  # sum over decoding of (its tokens - the step it had them at)
        self.prefill_held = 0  # KV tokens the prefilling requests hold, in whole blocks
        self.capacity = config.num_blocks * config.block_size
        # The decoders' KV blocks, and how many need a new one at step s: phase[(s - 1) %
        # block_size] (a decoder with context base b computes token b + s - 1 at step s).
        self.decode_blocks = 0
        self._phase = [0] * config.block_size
        self._order = 0
        self._finish_of: dict[FleetRequest, int] = {}  # decoding request -> its finish step
        self.num_preemptions = 0
        self.last_finish = start
        self.first_tokens: list[FleetRequest] = []  # events since the caller last drained them
        self.finished: list[FleetRequest] = []
        self.prefix = PrefixCache(config.kv_cache_tokens)
        self._cap = config.max_num_batched_tokens  # this step's per-request token cap
        # The prefix cache's free queue (prefix_caching), in tokens; each preempted request's
        # cached run in it.
        self._queue: FreeQueue[FleetRequest] = FreeQueue()
        self._cached: dict[FleetRequest, FreeRun[FleetRequest]] = {}
        # reserve_outputs: the decoders' remaining outputs, each clipped (Scheduler.
        # output_reserve): those below the clip as a sum of finish steps, the others counted
        # at the clip until the step their remaining output falls to it.
        self._linear_sum = self._linear = 0
        self._clipped: dict[FleetRequest, int] = {}
        self._clip_heap: list[tuple[int, int, FleetRequest]] = []

    # -- what the metrics read ---------------------------------------------------------------
    @property
    def running(self) -> int:
        return len(self.prefilling) + len(self.decoding)

    @property
    def outstanding(self) -> int:
        return self.running + len(self.waiting)

    @property
    def idle(self) -> bool:
        return not self.waiting and not self.prefilling and not self.decoding

    @property
    def kv_used(self) -> int:
        """KV tokens held, in whole blocks (what vllm:kv_cache_usage_perc counts)."""
        return self.prefill_held + self.decode_blocks * self.config.block_size

    def add(self, request: FleetRequest) -> None:
        if self.idle and self.now < request.arrival:
            self.now = request.arrival
        self.waiting.append(request)

    # -- time -----------------------------------------------------------------------------
    def advance(self, until: float) -> None:
        """Run every step that starts before `until` (a step may end after it)."""
        while self.now < until:
            if self.idle:
                self.now = until
                return
            # vLLM's long_prefill_token_threshold: counted over running and waiting requests
            # before the step is scheduled, as Scheduler.schedule does.
            self._cap = self.config.prefill_cap(self.outstanding)
            preempted, free, budget = self._make_room()
            if not preempted:  # as the scheduler: no admission in a step that preempted
                self._admit(free, budget)
            if self.prefilling:
                self._mixed_step()
            elif self.decoding:
                # After a preemption one step only: the next may admit the head again.
                self._decode_stretch(self.now if preempted else until)
            elif not preempted:  # cannot happen with a KV that holds one request
                raise RuntimeError("a waiting request can never be admitted")

    def drain(self) -> float:
        """Finish everything in flight; returns when the last request finished."""
        while not self.idle:
            self.advance(self.now + 60.0)
        return self.last_finish

    # -- KV room and admission --------------------------------------------------------------
    def _blocks(self, tokens: int) -> int:
        """`tokens` rounded up to whole blocks, in tokens."""
        size = self.config.block_size
        return -(-tokens // size) * size

    def _make_room(self) -> tuple[bool, int, int]:
        """The running requests' work this step (a token per decoder, the prompts' chunks in
        the budget left); while its KV does not fit, preempt the newest running request, as
        the scheduler does when an allocation fails. Returns (preempted, the KV tokens and
        the token budget left for admissions)."""
        cfg = self.config
        preempted = False
        while True:
            n = len(self.decoding)
            # SGLang's prefill batch: the decodes wait (and take no budget, no KV).
            need = 0
            if n and (cfg.mixed_prefill or not self.prefilling):
                need = self._blocks_over(1) * cfg.block_size
            budget = cfg.max_num_batched_tokens - (n if cfg.mixed_prefill else 0)
            for item in self.prefilling:
                if budget <= 0:
                    break
                chunk = min(item.left, budget, self._cap)
                need += self._blocks(item.computed + chunk) - self._blocks(item.computed)
                budget -= chunk
            free = self.capacity - self.kv_used
            if need <= free or not self.running:
                return preempted, free - need, budget
            self._preempt_newest()
            preempted = True

    def _admit(self, free: int, budget: int) -> None:
        cfg = self.config
        limit = cfg.max_num_seqs
        cap = self._cap
        clip = cfg.output_reserve_clip
        reserved = self._output_reserve() if cfg.reserve_outputs else 0
        # As the scheduler (scheduling/core.py, vLLM's V1 scheduler): running requests take
        # the step's token budget first, decodes then prompts being prefilled; a waiting
        # request is scheduled only while budget is left. Behind a long prefill it stays in
        # the queue: that wait is what vllm:request_queue_time_seconds and
        # vllm:num_requests_waiting show (admitting it at once would hide it from both).
        while self.waiting and self.running < limit and (budget > 0 or not self.prefilling):
            request = self.waiting[0]
            total = request.prompt + request.done
            if cfg.reserve_full_sequence and self._blocks(min(total, cfg.max_model_len)) > free:
                break
            out_left = min(request.output - request.done, clip)
            if cfg.reserve_outputs and total + out_left > free - reserved:
                break
            fresh = request.preemptions == 0
            own = self._hit(request) if request in self._cached else 0
            trace = 0
            if fresh and request.blocks:  # a look; the cache is used once it is admitted
                trace = min(self.prefix.leading(request.blocks) * BLOCK_TOKENS, request.prompt - 1)
            start = max(own, trace, 0)
            new = max(min(total - start, budget, cap), 0)
            if self._blocks(start + new) > free:
                break
            self.waiting.popleft()
            if own:
                self._take_hit(request, own)
            if fresh and request.blocks:
                request.cached = self.prefix.use(request.blocks, request.prompt)
            if request.scheduled_at is None:
                request.scheduled_at = max(self.now, request.arrival)
            self.prefilling.append(_Prefill(request, start, self._order))
            self._order += 1
            self.prefill_held += self._blocks(start)
            free -= self._blocks(start + new)
            reserved += out_left
            budget -= new

    # -- one step with prefill work -------------------------------------------------------------
    def _mixed_step(self) -> None:
        cfg = self.config
        decode = len(self.decoding) if cfg.mixed_prefill else 0
        budget = max(cfg.max_num_batched_tokens - decode, 0)
        cap = self._cap
        prefill = 0
        pairs = 0.0
        done: list[_Prefill] = []
        for item in self.prefilling:
            if budget <= 0:
                break
            left, computed = item.left, item.computed
            chunk = min(left, budget, cap)
            # A prefix hit skips that part of the prefill; its attention still reads it.
            pairs += chunk * chunk / 2 + chunk * computed
            prefill += chunk
            budget -= chunk
            self.prefill_held += self._blocks(computed + chunk) - self._blocks(computed)
            item.computed = computed + chunk
            if left == chunk:
                done.append(item)
        context = self.context_base + decode * self.steps if decode else 0
        self.now += self.timer.step_seconds(prefill, decode, context, pairs)
        if decode:
            self.decode_blocks += self._blocks_over(1)
            self.steps += 1
            self._finish_due()
        for item in done:
            # Capped chunks let a later prompt finish before an earlier one.
            self.prefilling.remove(item)
            self.prefill_held -= self._blocks(item.computed)
            self._sampled(item)

    def _sampled(self, item: _Prefill) -> None:
        """Its prefill (or recompute) done, a request samples a token and decodes on."""
        request = item.request
        request.done += 1
        if request.first_token_at is None:
            request.first_token_at = self.now
            self.first_tokens.append(request)
        if request.done >= request.output:
            self._finish(request)
            return
        # output - done more decode steps finish it; its context is prompt + done now.
        finish = self.steps + request.output - request.done
        heapq.heappush(self.decoding, (finish, item.order, request))
        self._finish_of[request] = finish
        base = request.prompt + request.done - self.steps
        self.context_base += base
        size = self.config.block_size
        self.decode_blocks += -(-(request.prompt + request.done - 1) // size)
        self._phase[-base % size] += 1
        if self.config.reserve_outputs:
            falls = finish - self.config.output_reserve_clip
            if falls > self.steps:
                self._clipped[request] = falls
                heapq.heappush(self._clip_heap, (falls, item.order, request))
            else:
                self._linear_sum += finish
                self._linear += 1

    # -- pure decode, many steps at once -------------------------------------------------------
    def _decode_stretch(self, until: float) -> None:
        n = len(self.decoding)
        to_finish = self.decoding[0][0] - self.steps
        context_now = self.context_base + n * self.steps
        one = self.timer.step_seconds(0, n, context_now)
        to_bound = max(1, math.ceil((until - self.now) / one)) if one > 0 else to_finish
        k = max(1, min(to_finish, to_bound))
        # Up to where the KV runs out (_make_room left room for one step at least).
        free = (self.capacity - self.kv_used) // self.config.block_size
        blocks = self._blocks_over(k)
        if blocks > free:
            k = self._steps_within(free)
            blocks = self._blocks_over(k)
        # Step time is affine in the context while memory-bound: the mid-stretch context
        # gives the stretch's total.
        mid = self.context_base + n * (self.steps + (k - 1) / 2)
        self.now += k * self.timer.step_seconds(0, n, int(mid))
        self.decode_blocks += blocks
        self.steps += k
        self._finish_due()

    def _blocks_over(self, steps: int) -> int:
        """KV blocks the decoders need over the next `steps` steps."""
        size = self.config.block_size
        whole, part = divmod(steps, size)
        blocks = whole * len(self.decoding)
        phase, start = self._phase, (self.steps - 1) % size
        for j in range(part):
            blocks += phase[(start + j) % size]
        return blocks

    def _steps_within(self, free: int) -> int:
        """The most decode steps (at least 1) whose new blocks fit `free` blocks."""
        size = self.config.block_size
        n = len(self.decoding)
        cycles = free // n if n else 0
        steps, left = cycles * size, free - cycles * n
        phase, start = self._phase, (self.steps - 1) % size
        for j in range(size):
            left -= phase[(start + steps + j) % size]
            if left < 0:
                return max(1, steps + j)
        return max(1, steps + size)

    def _finish_due(self) -> None:
        while self.decoding and self.decoding[0][0] <= self.steps:
            before = self.kv_used
            finish, _, request = heapq.heappop(self.decoding)
            self._stop_decoding(request, finish)
            request.done = request.output
            self._release(before - self.kv_used)
            self._finish(request)

    def _stop_decoding(self, request: FleetRequest, finish: int) -> None:
        del self._finish_of[request]
        base = request.prompt + request.output - finish
        self.context_base -= base
        size = self.config.block_size
        self.decode_blocks -= -(-(base + self.steps - 1) // size)
        self._phase[-base % size] -= 1
        if self.config.reserve_outputs and self._clipped.pop(request, None) is None:
            self._linear_sum -= finish
            self._linear -= 1

    def _finish(self, request: FleetRequest) -> None:
        request.finished_at = self.last_finish = self.now
        self.finished.append(request)

    def _output_reserve(self) -> int:
        """Tokens the running requests will still generate, each up to the clip (SGLang's
        admission offset, Scheduler.output_reserve)."""
        clip, steps = self.config.output_reserve_clip, self.steps
        heap = self._clip_heap
        while heap and heap[0][0] <= steps:
            falls, _, request = heapq.heappop(heap)
            if self._clipped.get(request) == falls:
                del self._clipped[request]
                self._linear_sum += self._finish_of[request]
                self._linear += 1
        decoders = self._linear_sum - self._linear * steps + clip * len(self._clipped)
        return decoders + sum(
            min(item.request.output - item.request.done, clip) for item in self.prefilling
        )

    # -- preemption and the prefix cache's free queue -------------------------------------------
    def _preempt_newest(self) -> None:
        before = self.kv_used
        newest = max(self.decoding, key=lambda entry: entry[1]) if self.decoding else None
        if newest is not None and (not self.prefilling or newest[1] > self.prefilling[-1].order):
            finish, _, request = newest
            self.decoding.remove(newest)
            heapq.heapify(self.decoding)
            self._stop_decoding(request, finish)
            request.done = request.output - (finish - self.steps)
            computed = request.prompt + request.done - 1
        else:
            item = self.prefilling.pop()
            request, computed = item.request, item.computed
            self.prefill_held -= self._blocks(computed)
        released = before - self.kv_used
        request.preemptions += 1
        self.num_preemptions += 1
        self.waiting.appendleft(request)
        if not self.config.prefix_caching:
            self._release(released)
            return
        queue = self._queue
        if not self._cached:  # the queue starts over: every free token is alike so far
            queue.restart(self.capacity - before)
        # Freed tail first, then its full blocks from the last to the first (core._preempt).
        size = self.config.block_size
        full = min(computed // size * size, max(released, 0))
        queue.append(None, released - full)
        run = queue.append(request, full)
        if run is not None:
            self._cached[request] = run

    def _release(self, tokens: int) -> None:
        if self._cached:
            self._queue.append(None, tokens)

    def _settle(self) -> None:
        for run in self._queue.settle(self.capacity - self.kv_used):
            owner = run.owner
            if owner is not None and self._cached.get(owner) is run:
                del self._cached[owner]

    def _hit(self, request: FleetRequest) -> int:
        """Tokens of a preempted request's own prefix still cached, in whole blocks, at most
        all but one of its tokens (one is computed for the logits)."""
        self._settle()
        run = self._cached.get(request)
        if run is None:
            return 0
        size = self.config.block_size
        return min(run.count, request.prompt + request.done - 1) // size * size

    def _take_hit(self, request: FleetRequest, hit: int) -> None:
        self._queue.take_hit(self._cached.pop(request), hit)
