"""Drives the pure scheduler in (scaled) real time on the asyncio loop.

Virtual time runs `time_scale` times faster than the loop's clock. One task loops: schedule
a step, sleep until the step's end maps to real time, complete it, wake the requests that
got a token. A busy engine's steps follow one another in virtual time: each starts where the
last ended, so a late wake-up (the OS timer's slack, the Python work of completing a step)
shortens the next sleep instead of idling the engine. Only when the loop is more than
`catch_up_seconds` of wall time behind (a machine too busy to keep the time scale) is the lag
given up: the virtual clock is rebased to the step's end, never charged to the simulated
engine, so reported latencies stay the capacity model's. What is given up is counted
(`lost_seconds`, virtual): `tokenfleet demo` checks it.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
from typing import Protocol

from tokenfleet.scheduling.core import Scheduler, SimRequest
from tokenfleet.sim.exporter import EngineMetrics

log = logging.getLogger("tokenfleet.sim")


class Handle:
    """What a request handler waits on: new tokens or the end of its request."""

    __slots__ = ("event", "every_token", "request")

    def __init__(self, request: SimRequest, every_token: bool) -> None:
        self.request = request
        self.every_token = every_token  # False: wake only when the request finishes
        self.event = asyncio.Event()

    async def wait(self, delivered: int) -> int:
        """Wait until more than `delivered` tokens exist (or the request finished);
        return the number of tokens generated so far."""
        while self.request.output_tokens <= delivered and not self.request.finished:
            self.event.clear()
            await self.event.wait()
        return self.request.output_tokens


class Clock(Protocol):
    """The real (unscaled) clock the engine paces its steps by."""

    def time(self) -> float: ...

    async def sleep(self, seconds: float) -> None: ...


class LoopClock:
    """The asyncio loop's monotonic clock: what `tokenfleet sim` runs on."""

    def __init__(self) -> None:
        self._loop = asyncio.get_running_loop()

    def time(self) -> float:
        return self._loop.time()

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)


class SimEngine:
    def __init__(
        self,
        scheduler: Scheduler,
        metrics: EngineMetrics,
        time_scale: float,
        clock: Clock | None = None,
        catch_up_seconds: float = 0.1,
    ) -> None:
        """`clock` is the loop's by default; tests pass one that advances only when the
        engine sleeps, so simulated latencies do not depend on how busy the machine is.
        `catch_up_seconds`: how far (wall seconds) the loop may run behind before the lag
        is given up; 0.1 s is far above a timer's slack and a step's own bookkeeping (a
        millisecond), and at 10x holds one simulated second, well inside one sample of the
        demo's 20 s view."""
        if time_scale <= 0:
            raise ValueError(f"time_scale={time_scale}: must be > 0")
        if catch_up_seconds < 0:
            raise ValueError(f"catch_up_seconds={catch_up_seconds}: must be >= 0")
        self.catch_up_seconds = catch_up_seconds
        self.scheduler = scheduler
        self.metrics = metrics
        self.time_scale = time_scale
        self._clock: Clock = clock or LoopClock()
        self._real_base = self._clock.time()
        self._virtual_base = 0.0
        self._last_arrival = 0.0
        self._handles: dict[SimRequest, Handle] = {}
        self._work = asyncio.Event()
        self._ids = itertools.count()
        self._task: asyncio.Task[None] | None = None
        self._step_end: float | None = None  # end of the step in flight
        self.steps = 0
        self.lost_seconds = 0.0  # virtual seconds a late step did not charge (see above)

    def now(self) -> float:
        """Current virtual (simulated) time in seconds."""
        return self._virtual_base + (self._clock.time() - self._real_base) * self.time_scale

    def _rebase(self, target: float) -> None:
        """Pause virtual time at `target` if it ran past it (never moves it forward)."""
        if self.now() > target:
            self._virtual_base = target
            self._real_base = self._clock.time()

    def next_index(self) -> int:
        return next(self._ids)

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="tokenfleet-sim-engine")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    def submit(self, request: SimRequest) -> Handle:
        # A request that comes while a step is (over)due arrives, for the simulated engine,
        # no later than that step's end: the next step is the first that can take it.
        arrival = self.now()
        if self._step_end is not None:
            arrival = min(arrival, self._step_end)
        request.arrival = arrival
        self._last_arrival = max(self._last_arrival, arrival)
        self.scheduler.add(request)
        handle = Handle(request, every_token=request.stream)
        self._handles[request] = handle
        self.metrics.on_queue_change(self.scheduler)
        self._work.set()
        return handle

    def abort(self, request: SimRequest) -> None:
        """The client went away: free its KV now, as vLLM does on disconnect."""
        self._handles.pop(request, None)
        if not request.finished:
            self.scheduler.abort(request)
            self.metrics.on_abort(request)
            self.metrics.on_queue_change(self.scheduler)

    def release(self, request: SimRequest) -> None:
        self._handles.pop(request, None)

    async def _run(self) -> None:
        scheduler = self.scheduler
        last_end: float | None = None  # the step just completed, when it was not given up
        while True:
            # No await between a step's completion and the next schedule, so no request
            # can arrive after `last_end` and be scheduled before it arrived.
            step = scheduler.schedule(self.now() if last_end is None else last_end)
            if step is None:
                last_end = None
                self._work.clear()
                await self._work.wait()
                # An idle engine starts at once: the loop's wake-up latency (x time_scale)
                # is not engine time. Pause virtual time back to the newest arrival.
                self._rebase(self._last_arrival)
                continue
            self._step_end = step.end
            delay = (step.end - self.now()) / self.time_scale
            await self._clock.sleep(max(delay, 0.0))
            outcome = scheduler.complete(step)
            self._step_end = None
            self.steps += 1
            self.metrics.on_step(step, outcome, scheduler)
            # Never let this process's own lag count as engine time: catch it up on the next
            # steps while it is small, give it up (and count it) once it is not.
            last_end = step.end
            lag = self.now() - step.end
            if lag > self.catch_up_seconds * self.time_scale:
                self.lost_seconds += lag
                self._rebase(step.end)
            for request in outcome.sampled:
                handle = self._handles.get(request)
                if handle is not None and (handle.every_token or request.finished):
                    handle.event.set()
