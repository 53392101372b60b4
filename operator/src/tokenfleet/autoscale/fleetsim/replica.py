"""One modelled replica for `tokenfleet autoscale-sim`: vLLM-style continuous batching, fast.

The step-by-step scheduler in `tokenfleet.scheduling.core` costs O(batch) Python work per
engine step; a 30-minute trace at tens of req/s is millions of steps per policy (minutes).
This model makes the same per-step decisions in aggregate and charges every step with the
capacity model's step timer (`StepModel.step_seconds`), so it stays within a few percent of
the scheduler (the unit test test_fleetsim_replica.py compares them) at about one
loop iteration per request event instead of one per step:

- Running requests first: each decoding request gets one token per step; the rest of the
  `max_num_batched_tokens` budget goes to prompts being prefilled, oldest first (chunked
  prefill), each at most `long_prefill_token_threshold` tokens while another request runs
  or waits; waiting requests are admitted FIFO while fewer than `max_num_seqs` run and
  their KV fits.
- A stretch of pure-decode steps (nothing to prefill, nothing admissible) is advanced in
  one go, up to the next finishing request or the caller's time bound; decode contexts are
  tracked as one sum, so a stretch costs O(1) however large the batch.
- Simplification: KV is reserved for prompt + output at admission (SGLang's conservative
  admission), so there is no preemption; vLLM admits on the prompt and preempts later.
"""

from __future__ import annotations

import heapq
import math
from collections import deque
from dataclasses import dataclass

from tokenfleet.autoscale.fleetsim.prefix import PrefixCache
from tokenfleet.scheduling.core import SchedulerConfig, StepTimer


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
    left: int  # prompt tokens still to compute


class FastReplica:
    """Event-driven continuous batching over the step model (see the module docstring)."""

    def __init__(self, config: SchedulerConfig, timer: StepTimer, start: float = 0.0) -> None:
        self.config = config
        self.timer = timer
        self.now = start  # end of the last step (the replica's own clock)
        self.waiting: deque[FleetRequest] = deque()
        self.prefilling: deque[_Prefill] = deque()
        self.decoding: list[tuple[int, int, FleetRequest]] = []  # (finish step, seq, request)
        self.steps = 0  # decode steps so far: every decoding request gains one token per step
        self.context_base = 0  # sum over decoding of (prompt + 1 - step it started at)
        self.kv_used = 0
        self._seq = 0
        self.last_finish = start
        self.first_tokens: list[FleetRequest] = []  # events since the caller last drained them
        self.finished: list[FleetRequest] = []
        self.prefix = PrefixCache(config.kv_cache_tokens)
        self._cap = config.max_num_batched_tokens  # this step's per-request token cap

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
            self._admit()
            if self.prefilling:
                self._mixed_step()
            elif self.decoding:
                self._decode_stretch(until)
            else:  # waiting but nothing fits: cannot happen with a KV that holds one request
                raise RuntimeError("a waiting request can never be admitted")

    def drain(self) -> float:
        """Finish everything in flight; returns when the last request finished."""
        while not self.idle:
            self.advance(self.now + 60.0)
        return self.last_finish

    # -- one step with prefill work -------------------------------------------------------------
    def _admit(self) -> None:
        limit = self.config.max_num_seqs
        kv = self.config.kv_cache_tokens
        # vLLM's long_prefill_token_threshold: counted over running and waiting requests
        # before the step is scheduled, as Scheduler.schedule does.
        cap = self._cap = self.config.prefill_cap(self.outstanding)
        # As the scheduler (scheduling/core.py, vLLM's V1 scheduler): running requests take
        # the step's token budget first, decodes then prompts being prefilled; a waiting
        # request is scheduled only while budget is left. Behind a long prefill it stays in
        # the queue: that wait is what vllm:request_queue_time_seconds and
        # vllm:num_requests_waiting show (admitting it at once would hide it from both).
        budget = self.config.max_num_batched_tokens - len(self.decoding)
        budget -= sum(min(item.left, cap) for item in self.prefilling)
        while self.waiting and self.running < limit and (budget > 0 or not self.prefilling):
            request = self.waiting[0]
            need = min(request.prompt + request.output, self.config.max_model_len)
            if self.kv_used + need > kv:
                break
            self.waiting.popleft()
            request.scheduled_at = max(self.now, request.arrival)
            self.kv_used += need
            if request.blocks:
                request.cached = self.prefix.use(request.blocks, request.prompt)
            # A prefix hit skips that part of the prefill; its attention still reads it.
            self.prefilling.append(_Prefill(request, request.prompt - request.cached))
            budget -= min(request.prompt - request.cached, cap)

    def _mixed_step(self) -> None:
        decode = len(self.decoding)
        budget = max(self.config.max_num_batched_tokens - decode, 0)
        cap = self._cap
        prefill = 0
        pairs = 0.0
        done: list[_Prefill] = []
        for item in self.prefilling:
            if budget <= 0:
                break
            request, left = item.request, item.left
            chunk = min(left, budget, cap)
            computed = request.prompt - left
            pairs += chunk * chunk / 2 + chunk * computed
            prefill += chunk
            budget -= chunk
            item.left = left - chunk
            if left == chunk:
                done.append(item)
        context = self.context_base + decode * self.steps
        self.now += self.timer.step_seconds(prefill, decode, context, pairs)
        self.steps += 1
        self._finish_due()
        for item in done:
            # Capped chunks let a later prompt finish before an earlier one.
            self.prefilling.remove(item)
            self._first_token(item.request)

    def _first_token(self, request: FleetRequest) -> None:
        request.first_token_at = self.now
        self.first_tokens.append(request)
        if request.output <= 1:
            self._finish(request)
            return
        # Its first token came with this step; output - 1 more decode steps finish it.
        self._seq += 1
        heapq.heappush(self.decoding, (self.steps + request.output - 1, self._seq, request))
        self.context_base += request.prompt + 1 - self.steps

    # -- pure decode, many steps at once -------------------------------------------------------
    def _decode_stretch(self, until: float) -> None:
        n = len(self.decoding)
        to_finish = self.decoding[0][0] - self.steps
        context_now = self.context_base + n * self.steps
        one = self.timer.step_seconds(0, n, context_now)
        to_bound = max(1, math.ceil((until - self.now) / one)) if one > 0 else to_finish
        k = max(1, min(to_finish, to_bound))
        # Step time is affine in the context while memory-bound: the mid-stretch context
        # gives the stretch's total.
        mid = self.context_base + n * (self.steps + (k - 1) / 2)
        self.now += k * self.timer.step_seconds(0, n, int(mid))
        self.steps += k
        self._finish_due()

    def _finish_due(self) -> None:
        while self.decoding and self.decoding[0][0] <= self.steps:
            finish, _, request = heapq.heappop(self.decoding)
            self.context_base -= request.prompt + 1 - (finish - request.output + 1)
            self._finish(request)

    def _finish(self, request: FleetRequest) -> None:
        request.finished_at = self.last_finish = self.now
        self.kv_used -= min(request.prompt + request.output, self.config.max_model_len)
        self.finished.append(request)
