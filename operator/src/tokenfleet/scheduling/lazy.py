"""The same scheduler with lazy decode accounting: what plan()'s virtual runs step.

In a steady serving load almost every running request is decoding: each step gives it one
token and, every `block_size` tokens, one more KV block. The eager Scheduler walks every
running request on every step (schedule, complete, fast_forward), so a virtual run costs
(events x running requests). Here a decoding request is not touched while it decodes: its
progress is the step counter's difference since it started decoding (`tick - t0`), the
blocks the decoders need on a step come from a count per block phase, their total context
is a running sum, and the next one to finish sits on a heap. A step that only prefills a
new arrival next to a hundred decoders costs O(prefilling requests + finishing ones).

Same decisions, same step times: the fast path is taken only where the eager scheduler's
order-dependent choices cannot differ (the decoders' tokens and blocks fit, no preemption,
the token budget cannot cut a decoder off). Anything else (preemption, a budget that runs
out before a decoder) materialises every request and runs the eager code for that step.
the unit test test_lazy.py compares whole load runs of both, event for event.

Only for virtual runs: per-token timestamps are not recorded, `StepOutcome.sampled` lists
only the requests that changed visibly (prefills and finishes), and a decoding request's
counters are current only when it finishes (or `materialize()` is called).
"""

from __future__ import annotations

import heapq
import math
from typing import NamedTuple

from tokenfleet.scheduling.core import (
    FastForward,
    ScheduledStep,
    Scheduler,
    SchedulerConfig,
    SimRequest,
    StepOutcome,
    StepTimer,
)

_Lazy = tuple[int, int, int, int]  # (t0, computed at t0, output tokens at t0, order)


class LazyScheduler(Scheduler):
    def __init__(self, config: SchedulerConfig, timer: StepTimer) -> None:
        self._eager_mode = False
        self._eager: list[SimRequest] = []
        super().__init__(config, timer, record_token_times=False)
        self.tick = 0  # completed steps
        self._order = 0  # admission counter: running order is ascending order
        self._orders: dict[SimRequest, int] = {}  # non-decoding running requests' orders
        self._active: list[SimRequest] = []  # running, not (lazily) decoding; in order
        self._lazy: dict[SimRequest, _Lazy] = {}
        self._finish: list[tuple[int, int, SimRequest]] = []  # (finish tick, order, request)
        self._phase = [0] * config.block_size  # decoders needing a block when tick % size == k
        self._context_base = 0  # decoders' context at tick t = base + len(lazy) * t
        # reserve_outputs: the decoders' remaining outputs, each clipped (output_reserve).
        # Above the clip a decoder counts the clip (_clipped, until the tick its remaining
        # output falls to it); below, base - linear * t at tick t.
        self._remaining_base = 0
        self._linear = 0
        self._clipped: dict[SimRequest, int] = {}  # decoder -> the tick it falls to the clip
        self._clip_heap: list[tuple[int, int, SimRequest]] = []
        self._lazy_max_order = -1  # an upper bound (reset when no one decodes)
        self._last_end = 0.0  # end of the last step: every decoder's last token
        self.eager_steps = 0  # steps that took the eager path (tests check both paths run)

    # -- the running set, as the eager code and readers see it ------------------------------
    @property
    def running(self) -> list[SimRequest]:
        if self._eager_mode:
            return self._eager
        self.materialize()
        return list(self._active)

    @running.setter
    def running(self, value: list[SimRequest]) -> None:
        self._eager = value

    @property
    def idle(self) -> bool:
        return not self.waiting and not self._active and not self._lazy

    @property
    def used_tokens(self) -> int:
        return sum(r.num_computed for r in self.running)

    def materialize(self) -> None:
        """Bring every decoder's counters up to date and move it back among the active ones
        (in running order); the next step re-partitions."""
        if not self._lazy:
            return
        size = self.config.block_size
        for request, (t0, c0, o0, order) in self._lazy.items():
            self._bring_up_to_date(request, t0, c0, o0, size)
            self._orders[request] = order
        merged = list(self._active) + list(self._lazy)
        merged.sort(key=self._orders.__getitem__)
        self._active = merged
        self._clear_lazy()

    def _bring_up_to_date(self, request: SimRequest, t0: int, c0: int, o0: int, size: int) -> None:
        done = self.tick - t0
        request.num_computed = c0 + done
        request.output_tokens = o0 + done
        request.blocks = -(-request.num_computed // size)
        if done:
            request.last_token_at = self._last_end

    def _clear_lazy(self) -> None:
        self._lazy.clear()
        self._finish.clear()
        self._phase = [0] * self.config.block_size
        self._context_base = 0
        self._remaining_base = 0
        self._linear = 0
        self._clipped.clear()
        self._clip_heap.clear()
        self._lazy_max_order = -1

    def _stop_decoding(self, request: SimRequest) -> None:
        t0, c0, o0, order = self._lazy.pop(request)
        self._bring_up_to_date(request, t0, c0, o0, self.config.block_size)
        self._phase[(t0 - c0) % self.config.block_size] -= 1
        self._context_base -= request.prompt_tokens + o0 - t0
        if self.config.reserve_outputs and self._clipped.pop(request, None) is None:
            self._remaining_base -= request.max_tokens - o0 + t0
            self._linear -= 1
        self._orders[request] = order
        if not self._lazy:
            self._clear_lazy()

    def abort(self, request: SimRequest) -> None:
        if request in self._lazy:
            self._stop_decoding(request)
        elif request.state == "running":
            self._active.remove(request)
        if request.state == "running":
            self._orders.pop(request, None)
            self._free(request)
        elif request.state == "waiting":
            self.waiting.remove(request)
            self._uncache(request)
        if request.state in ("running", "waiting"):
            request.state = "aborted"

    # -- one step ---------------------------------------------------------------------------
    def schedule(self, now: float) -> ScheduledStep | None:
        cfg = self.config
        size = cfg.block_size
        n = len(self._lazy)
        budget = cfg.max_num_batched_tokens
        prefill_only = not cfg.mixed_prefill and self._lazy_prefill_pending()
        if prefill_only:
            n = 0  # SGLang's prefill batch: the decoders wait, untouched (no tick)
        lazy_blocks = self._phase[self.tick % size] if n else 0
        cap = budget  # prefill_cap without the call where no threshold is set (the rule)
        if cfg.long_prefill_token_threshold > 0:
            cap = cfg.prefill_cap(len(self._lazy) + len(self._active) + len(self.waiting))
        # Plan the active requests' pieces (in running order, after the decoders) without
        # touching anything, then check the eager scheduler would have done the same.
        plan: list[tuple[SimRequest, int, int]] = []  # (request, new tokens, blocks needed)
        left = budget - n
        blocks = lazy_blocks
        active = self._active
        if active:
            full = n  # tokens if nobody were capped by the budget
            capped_order = None
            orders = self._orders
            for request in active:
                if left <= 0:
                    capped_order = orders[request]
                    break
                want = request.prompt_tokens + request.output_tokens - request.num_computed
                if prefill_only and want == 1 and request.output_tokens > 0:
                    continue  # a (materialised) decoder waits for the prefill batch
                if want > cap:
                    want = cap  # long_prefill_token_threshold: not the budget's cut
                full += want
                new = min(want, left)
                if new < want:
                    capped_order = orders[request]
                need = -(-(request.num_computed + new) // size) - request.blocks
                blocks += max(need, 0)
                plan.append((request, new, need))
                left -= new
            # Decoders after a capped piece would be cut off; in a prefill batch they wait.
            order_safe = prefill_only or capped_order is None or capped_order > self._lazy_max_order
            if left < 0 or blocks > self.free_blocks or not (order_safe or full <= budget):
                return self._eager_schedule(now)
        elif left < 0 or blocks > self.free_blocks:  # (nobody capped: the order is safe)
            return self._eager_schedule(now)

        self.free_blocks -= blocks
        work: list[tuple[SimRequest, int]] = []
        prefill = 0
        decode_seqs = n
        decode_context = self._context_base + n * self.tick if n else 0
        pairs = 0.0
        for request, new, need in plan:
            if need > 0:
                request.blocks += need
            work.append((request, new))
            computed = request.num_computed
            total = request.prompt_tokens + request.output_tokens
            if new == 1 and request.output_tokens > 0 and computed == total - 1:
                # A decoder not (yet) lazy: only after materialize(); counted as eagerly.
                decode_seqs += 1
                decode_context += total
            else:
                prefill += new
                pairs += new * new / 2 + new * computed
        budget = left
        waiting = self.waiting
        if waiting:  # Scheduler.schedule's admissions, _allocate inlined
            active, orders = self._active, self._orders
            running = len(self._lazy) + len(active)
            max_seqs = cfg.max_num_seqs
            free = self.free_blocks
            full_gate = cfg.reserve_full_sequence
            reserve_outputs = cfg.reserve_outputs
            reserved = self.output_reserve() if reserve_outputs else 0
            while waiting and budget > 0 and running < max_seqs:
                request = waiting[0]
                total = request.prompt_tokens + request.output_tokens
                if full_gate:  # SchedulerConfig.piece_fits' whole-sequence rule, inlined
                    whole = total if total < cfg.max_model_len else cfg.max_model_len
                    if -(-whole // size) - request.blocks > free:
                        break
                if reserve_outputs:
                    if not cfg.outputs_fit(request, free, reserved):
                        break
                    left = request.max_tokens - request.output_tokens
                    reserved += min(left, cfg.output_reserve_clip)
                hit = 0
                if request.cached is not None:
                    self.free_blocks = free  # _hit_blocks settles the queue on the count
                    hit = self._hit_blocks(request)
                computed = request.num_computed + hit * size
                new = total - computed
                if budget < new:
                    new = budget
                if cap < new:
                    new = cap  # long_prefill_token_threshold
                need = -(-(computed + new) // size) - request.blocks
                if need > free:
                    break
                if hit:
                    self.free_blocks = free
                    self._take_hit(request, hit)
                    free = self.free_blocks
                    need -= hit
                if need > 0:
                    free -= need
                    request.blocks += need
                waiting.popleft()
                active.append(request)
                running += 1
                orders[request] = self._order
                self._order += 1
                request.state = "running"
                if request.scheduled_at is None:
                    request.scheduled_at = now
                work.append((request, new))
                budget -= new
                prefill += new
                pairs += new * new / 2 + new * computed
            self.free_blocks = free
        if not work and not n:
            return None
        duration = self.timer.step_seconds(prefill, decode_seqs, decode_context, pairs)
        return ScheduledStep(now, duration, tuple(work), prefill, decode_seqs, decode_context, ())

    def _lazy_prefill_pending(self) -> bool:
        """Scheduler._prefill_pending without materialising: decoders never prefill. (Its
        own name: the eager code, run in eager mode, calls the eager one.)"""
        cfg = self.config
        for request in self._active:
            if request.output_tokens == 0 or request.num_computed != request.num_tokens - 1:
                return cfg.piece_fits(request, cfg.max_num_batched_tokens, self.free_blocks)
        return bool(
            self.waiting
            and len(self._lazy) + len(self._active) < cfg.max_num_seqs
            and self.head_fits(cfg.max_num_batched_tokens, self.free_blocks)
        )

    def output_reserve(self) -> int:
        """Scheduler.output_reserve without materialising: the decoders' remaining outputs
        fall by one each tick from a running sum, those still above the clip count it."""
        clip = self.config.output_reserve_clip
        if self._eager_mode:
            return sum(min(r.max_tokens - r.output_tokens, clip) for r in self._eager)
        heap, tick = self._clip_heap, self.tick
        while heap and heap[0][0] <= tick:  # fallen to the clip: counted linearly from now
            at, _, request = heapq.heappop(heap)
            if self._clipped.get(request) == at:
                del self._clipped[request]
                t0, _, o0, _ = self._lazy[request]
                self._remaining_base += request.max_tokens - o0 + t0
                self._linear += 1
        lazy = self._remaining_base - self._linear * tick + clip * len(self._clipped)
        return lazy + sum(min(r.max_tokens - r.output_tokens, clip) for r in self._active)

    def _eager_schedule(self, now: float) -> ScheduledStep | None:
        """Preemption ahead, or the budget may cut a decoder off: run the eager code."""
        self.eager_steps += 1
        self.materialize()
        self._eager = self._active
        self._active = []
        self._eager_mode = True
        step = super().schedule(now)
        if step is None:
            self._leave_eager_mode()
        return step

    def _leave_eager_mode(self) -> None:
        self._eager_mode = False
        self._active = []
        self._orders = {}
        for request in self._eager:  # fresh orders, same relative order
            self._orders[request] = self._order
            self._order += 1
            self._active.append(request)
        self._eager = []
        self._repartition()

    def _repartition(self) -> None:
        """Active requests that now decode go lazy (_start_decoding, inlined: this runs
        after every step that is not a fast-forward)."""
        keep: list[SimRequest] = []
        orders, lazy, finish, phase = self._orders, self._lazy, self._finish, self._phase
        t0, size, max_len = self.tick, self.config.block_size, self.config.max_model_len
        reserve, clip = self.config.reserve_outputs, self.config.output_reserve_clip
        for request in self._active:
            o0 = request.output_tokens
            c0 = request.num_computed
            total = request.prompt_tokens + o0
            if o0 > 0 and c0 == total - 1:
                order = orders.pop(request)
                lazy[request] = (t0, c0, o0, order)
                left = min(request.max_tokens - o0, max_len - total)
                heapq.heappush(finish, (t0 + left, order, request))
                phase[(t0 - c0) % size] += 1
                self._context_base += total - t0
                if reserve:
                    over = request.max_tokens - o0 - clip
                    if over > 0:
                        self._clipped[request] = t0 + over
                        heapq.heappush(self._clip_heap, (t0 + over, order, request))
                    else:
                        self._remaining_base += request.max_tokens - o0 + t0
                        self._linear += 1
                if order > self._lazy_max_order:
                    self._lazy_max_order = order
            else:
                keep.append(request)
        self._active = keep

    def complete(self, step: ScheduledStep) -> StepOutcome:
        end, sampled, finished = self.finish_step(step)
        return StepOutcome(end, tuple(sampled), tuple(finished))

    def finish_step(self, step: ScheduledStep) -> tuple[float, list[SimRequest], list[SimRequest]]:
        """complete() without the record: (end, sampled, finished) as lists. The virtual
        runs call it on every step and need only the end and the finished."""
        if self._eager_mode:
            outcome = super().complete(step)
            self.tick += 1
            self._last_end = outcome.end
            self._leave_eager_mode()
            return outcome.end, list(outcome.sampled), list(outcome.finished)
        end = step.start + step.duration  # step.end, without the property call
        if step.decode_seqs:  # the decoders took their token (not in a prefill batch)
            self.tick += 1
            self._last_end = end
        sampled: list[SimRequest] = []
        finished: list[SimRequest] = []
        max_len = self.config.max_model_len
        for request, tokens in step.work:
            if request.state != "running":
                continue
            request.num_computed += tokens
            if request.num_computed < request.prompt_tokens + request.output_tokens:
                continue
            request.output_tokens += 1
            if request.first_token_at is None:
                request.first_token_at = end
            request.last_token_at = end
            sampled.append(request)
            if (
                request.output_tokens >= request.max_tokens
                or request.prompt_tokens + request.output_tokens >= max_len
            ):
                request.finished_at = end
                request.state = "finished"
                self._free(request)
                finished.append(request)
        if finished:
            self._active = [r for r in self._active if r.state == "running"]
        heap = self._finish
        if heap and heap[0][0] <= self.tick:  # (the calls below cost more than the checks)
            finished.extend(self._pop_finished(end))
        if len(finished) > 1:
            finished.sort(key=self._orders.__getitem__)
        for request in finished:
            self._orders.pop(request, None)
        if self._active:
            self._repartition()
        return end, sampled, finished

    def _pop_finished(self, end: float) -> list[SimRequest]:
        """Decoders whose last token came at this tick (their orders kept for sorting)."""
        out: list[SimRequest] = []
        heap = self._finish
        while heap and heap[0][0] <= self.tick:
            _, order, request = heapq.heappop(heap)
            entry = self._lazy.get(request)
            if entry is None or entry[3] != order:
                continue  # stale: it left the decoders (abort) since
            self._stop_decoding(request)
            request.finished_at = end
            request.last_token_at = end
            request.state = "finished"
            self._free(request)
            out.append(request)
        return out

    # -- many decode steps at once ----------------------------------------------------------
    def fast_forward(self, now: float, until: float | None = None) -> FastForward | None:
        """Scheduler.fast_forward's decisions and step times, in O(block_size + finishes)."""
        n = len(self._lazy)
        cfg = self.config
        if not n or self._active or n > cfg.max_num_batched_tokens:
            return None
        waiting = self.waiting
        if waiting and n < cfg.max_num_seqs:
            budget = cfg.max_num_batched_tokens - (n if cfg.mixed_prefill else 0)
            if cfg.long_prefill_token_threshold > 0:
                cap = cfg.prefill_cap(n + len(waiting))
                if cap < budget:
                    budget = cap
            # head_fits, inlined for the engines' common rules (the hot path of plan()).
            head, free, size = waiting[0], self.free_blocks, cfg.block_size
            computed = head.num_computed
            total = head.prompt_tokens + head.output_tokens
            new = total - computed
            if budget < new:
                new = budget
            fits = -(-(computed + new) // size) - head.blocks <= free
            if fits and cfg.reserve_full_sequence:
                whole = total if total < cfg.max_model_len else cfg.max_model_len
                fits = -(-whole // size) - head.blocks <= free
            if fits and cfg.reserve_outputs:
                fits = cfg.outputs_fit(head, free, self.output_reserve())
            if fits:
                return None  # it would be admitted now
        heap = self._finish
        lazy = self._lazy
        while heap and ((entry := lazy.get(heap[0][2])) is None or entry[3] != heap[0][1]):
            heapq.heappop(heap)
        steps = heap[0][0] - self.tick
        if steps > cfg.max_model_len:
            steps = cfg.max_model_len
        # Unlike Scheduler.fast_forward, a single step too (a finish or an arrival next):
        # it is the pure decode step schedule() would plan, at its time (first: no
        # interpolation), one call instead of a failed fast-forward, schedule and complete.
        if steps < 1 or (until is not None and until <= now):
            return None
        blocks = self._blocks_over(steps)
        if blocks > self.free_blocks:
            if steps == 1:
                return None
            steps, blocks = 1, self._blocks_over(1)  # the span's blocks run out: one step
            if blocks > self.free_blocks:
                return None
        context = self._context_base + n * self.tick
        first = self.timer.step_seconds(0, n, context)
        last, slope = first, 0.0
        if steps > 1:
            last = self.timer.step_seconds(0, n, context + (steps - 1) * n)
            slope = (last - first) / (steps - 1)
        if until is not None:
            cut = self._steps_before(steps, first, slope, until - now)
            if cut < steps:
                steps = cut
                blocks = self._blocks_over(steps)
            last = first + slope * (steps - 1)
        if steps == 1 and not cfg.mixed_prefill and self.waiting and n < cfg.max_num_seqs:
            # SGLang's prefill batch is ruled out above, but schedule() would still admit
            # the head beside the decoders, with what they leave of the budget and blocks.
            left = cfg.max_num_batched_tokens - n
            if left > 0 and self.head_fits(left, self.free_blocks - blocks):
                return None
        duration = steps * (first + last) / 2
        end = now + duration
        self.free_blocks -= blocks
        tick = self.tick = self.tick + steps
        self._last_end = end
        if heap[0][0] > tick:  # cut short by an arrival: nobody finishes (the call costs)
            return FastForward(now, end, steps, n, context, first, last)
        finished = self._pop_finished(end)
        if finished:
            finished.sort(key=self._orders.__getitem__)
            for request in finished:
                self._orders.pop(request, None)
        return FastForward(now, end, steps, n, context, first, last, tuple(finished))

    @staticmethod
    def _steps_before(steps: int, first: float, slope: float, left: float) -> int:
        """Scheduler.fast_forward's cut before the next arrival, the same arithmetic."""
        a, b = slope / 2, first - slope / 2
        m = left / first if a <= 1e-15 else (-b + math.sqrt(b * b + 4 * a * left)) / (2 * a)
        return min(steps, max(math.ceil(m - 1e-9), 1))

    def _blocks_over(self, steps: int) -> int:
        """KV blocks the decoders need over the next `steps` steps."""
        size = self.config.block_size
        whole, part = divmod(steps, size)
        blocks = whole * len(self._lazy)
        if part:
            phase, start = self._phase, self.tick % size
            stop = start + part
            blocks += sum(phase[start:stop])
            if stop > size:  # the window wraps round the block
                blocks += sum(phase[: stop - size])
        return blocks

    # -- many capped prefill chunks at once -------------------------------------------------
    def prefill_forward(self, now: float) -> PrefillRun | None:
        """The next steps at once while schedule() would plan each of them alike: the one
        non-decoding request takes a chunk cut by the token budget (so the budget is spent
        and nobody waiting is looked at: arrivals in between change nothing), every decoder
        one token (SGLang's prefill batch: none, they wait), decoders finish only in the
        last of them (returned, as complete() would), and the blocks are there. A saturated
        closed loop in lockstep groups (a token budget of a few hundred) spends most of its
        steps so; this costs one step_seconds() call per step, with the same arguments in
        the same order, so the times are schedule()'s and complete()'s to the bit. None
        when the next step must go through schedule()."""
        if self._eager_mode or len(self._active) != 1:
            return None
        cfg = self.config
        request = self._active[0]
        # SGLang's prefill batch (the chunk fits: checked below with the blocks): the
        # decoders wait, untouched.
        n = len(self._lazy) if cfg.mixed_prefill else 0
        if n and not self._orders[request] > self._lazy_max_order:
            return None  # a decoder after the capped chunk would be cut off: eager
        left = cfg.max_num_batched_tokens - n
        computed = request.num_computed
        total = request.prompt_tokens + request.output_tokens
        if left <= 0 or total - computed <= left:
            return None
        if 0 < cfg.long_prefill_token_threshold < total - computed:
            return None  # the threshold, not the budget, cuts its chunks: schedule() does
        steps_left = cfg.max_model_len  # bounded anyway: the prompt runs out first
        if n:
            heap = self._finish
            while heap and (
                (entry := self._lazy.get(heap[0][2])) is None or entry[3] != heap[0][1]
            ):
                heapq.heappop(heap)
            if heap:  # decoders finishing at tick f leave at the end of the step to f: last
                steps_left = heap[0][0] - self.tick
        size = cfg.block_size
        timer = self.timer
        phase = self._phase
        tick, free, blocks_held = self.tick, self.free_blocks, request.blocks
        base = self._context_base
        durations: list[float] = []
        while steps_left > 0 and total - computed > left:
            need = -(-(computed + left) // size) - blocks_held
            blocks = (phase[tick % size] if n else 0) + (need if need > 0 else 0)
            if blocks > free:
                break  # preemption ahead (SGLang: a decode batch): schedule() decides
            free -= blocks
            if need > 0:
                blocks_held += need
            pairs = left * left / 2 + left * computed
            duration = timer.step_seconds(left, n, base + n * tick if n else 0, pairs)
            durations.append(duration)
            now = now + duration  # ScheduledStep.end: start + duration, step by step
            computed += left
            if n:
                tick += 1
            steps_left -= 1
        if not durations:
            return None
        request.num_computed, request.blocks = computed, blocks_held
        self.free_blocks = free
        finished: list[SimRequest] = []
        if n:
            self.tick, self._last_end = tick, now
            finished = self._pop_finished(now)  # as complete() ends the last step
            if len(finished) > 1:
                finished.sort(key=self._orders.__getitem__)
            for done in finished:
                self._orders.pop(done, None)
        return PrefillRun(now, tuple(durations), n, tuple(finished))


class PrefillRun(NamedTuple):
    """LazyScheduler.prefill_forward: steps of one capped prefill chunk each (+ decodes)."""

    end: float
    durations: tuple[float, ...]  # each step's, in order
    decode_seqs: int  # every step's (0: SGLang's prefill batches)
    finished: tuple[SimRequest, ...]  # decoders whose last token came in the last step
