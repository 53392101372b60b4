"""Open-loop load on the local fleet, through tokenfleet.bench's client.

Poisson arrivals at a rate that changes over time: a schedule (rate at each simulated second,
the demo's ramps and steps) or the `rate` a caller sets. The arrival times are drawn on an
absolute clock (a non-homogeneous Poisson process: each gap is where the rate's integral
reaches an exponential draw), so a send that runs late does not delay the ones after it:
the generator catches up, and counts how late it was and what it could not send (no ready
replica, or MAX_IN_FLIGHT reached). With a schedule the arrival times depend on the seed
alone, not on how busy the machine is. Each request goes to the ready endpoint with the
fewest requests in flight (ties in turn), as an inference gateway routes (the Gateway API
inference extension, llm-d), so a replica that just became ready takes new work while an
overloaded one drains its queue. Each request is timed by
`tokenfleet.bench.client.send_one` exactly as `tokenfleet bench` times it. Rates are in
simulated requests per second: at time scale K the generator sends K times as many per wall
second, and a measured wall-clock latency is multiplied by K.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import math
import random
import time
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass, field

import aiohttp

from tokenfleet.bench.aggregate import RequestOutput, tpot_seconds
from tokenfleet.bench.client import BenchConfig, make_client, request_body, send_one
from tokenfleet.bench.dataset import DatasetSpec

# Requests in flight at most: beyond it arrivals are dropped and counted, so a fleet that
# cannot keep up never turns the harness itself into the bottleneck.
MAX_IN_FLIGHT = 2000
# A send later than this (simulated seconds) behind its arrival time counts as late: a
# second is a tenth of the signals' 10 s scrape and far below the autoscaler's windows.
LATE_S = 1.0
# The rate is integrated in steps of this many simulated seconds (schedules are piecewise
# linear over minutes), and an idle caller-set rate is looked at again this often.
STEP_S = 1.0
IDLE_WALL_S = 0.1


# How far ahead (simulated seconds) one draw looks for its arrival; past it, a rate that
# stayed 0 is looked at again from there with a fresh draw (memoryless: the same process).
LOOKAHEAD_S = 60.0


def next_arrival(
    rate_at: Callable[[float], float], t: float, draw: float, horizon: float
) -> float | None:
    """The time after `t` at which the integral of `rate_at` from `t` reaches `draw` (an
    Exp(1) draw): the next arrival of the non-homogeneous Poisson process. Integrated by the
    trapezoid rule over STEP_S steps, solved linearly within the last. None: not before
    `horizon`."""
    acc = 0.0
    while t < horizon:
        end = min(t + STEP_S, horizon)
        r0, r1 = max(rate_at(t), 0.0), max(rate_at(end), 0.0)
        area = (r0 + r1) / 2 * (end - t)
        if area > 0 and acc + area >= draw:
            return t + (end - t) * (draw - acc) / area
        acc += area
        t = end
    return None


def arrival_times(rate_at: Callable[[float], float], end_s: float, seed: int) -> Iterator[float]:
    """The arrival times of a Poisson process at `rate_at` (req/s at each second) over
    [0, end_s), in order: a pure function of the schedule and the seed."""
    rng = random.Random(seed)
    t = 0.0
    while t < end_s:
        horizon = min(t + LOOKAHEAD_S, end_s)
        found = next_arrival(rate_at, t, rng.expovariate(1.0), horizon)
        if found is None:  # none before the horizon: a fresh draw from there (memoryless)
            t = horizon
            continue
        t = found
        yield t


@dataclass
class Finished:
    sent: float  # wall clock (monotonic)
    output: RequestOutput
    output_len: int


@dataclass
class LoadGenerator:
    endpoints: Callable[[], list[str]]
    model: str
    dataset: DatasetSpec
    time_scale: float = 1.0
    seed: int = 0
    rate: float = 0.0  # simulated requests per second; change it at any time (no schedule)
    schedule: Callable[[float], float] | None = None
    """Simulated requests per second at each simulated second since start(); wins over
    `rate`. Its arrival times depend on the seed alone."""
    end_s: float = math.inf  # simulated seconds after start(): no arrival from then on
    finished: list[Finished] = field(default_factory=list)
    scheduled: int = 0  # arrivals whose time came
    sent: int = 0
    no_endpoint: int = 0  # arrivals not sent: no ready endpoint
    too_busy: int = 0  # arrivals not sent: MAX_IN_FLIGHT requests in flight
    late: int = 0  # sent more than LATE_S simulated seconds after their arrival time
    worst_late_s: float = 0.0  # simulated seconds
    in_flight: int = 0
    started: float = 0.0  # wall clock (monotonic) of start()
    _task: asyncio.Task[None] | None = None
    _pending: set[asyncio.Task[None]] = field(default_factory=set)
    _busy: dict[str, int] = field(default_factory=dict)  # requests in flight per endpoint

    @property
    def dropped(self) -> int:
        """Arrivals not sent, for any reason."""
        return self.no_endpoint + self.too_busy

    def sim_now(self) -> float:
        return (time.monotonic() - self.started) * self.time_scale

    def offered(self, at: float | None = None) -> float:
        """The rate asked for at simulated second `at` (default: now)."""
        t = self.sim_now() if at is None else at
        if t >= self.end_s:
            return 0.0
        return self.schedule(t) if self.schedule is not None else self.rate

    async def start(self) -> None:
        self.started = time.monotonic()
        self._task = asyncio.create_task(self._run(), name="load")

    def check(self) -> None:
        """Raise what stopped the generator, if anything did (a bug must not look idle)."""
        if self._task is not None and self._task.done() and not self._task.cancelled():
            error = self._task.exception()
            if error is not None:
                raise RuntimeError(f"the load generator stopped: {error!r}") from error

    async def finish(self) -> None:
        """Wait until the schedule has ended (end_s) and every request sent has finished."""
        if self._task is not None:
            await self._task

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        for task in list(self._pending):
            task.cancel()
        await asyncio.gather(*self._pending, return_exceptions=True)

    async def _arrivals(self) -> AsyncIterator[float]:
        """The arrival times (simulated seconds since start()), each yielded when its wall
        time comes (at once when the generator runs behind)."""
        if self.schedule is not None:
            times: Iterator[float] = arrival_times(self.offered_at, self.end_s, self.seed)
        else:
            times = self._caller_rate_times()
        for due in times:
            if due < 0:  # the caller's rate is 0: look again shortly
                await asyncio.sleep(IDLE_WALL_S)
                continue
            wait = self.started + due / self.time_scale - time.monotonic()
            if wait > 0:
                await asyncio.sleep(wait)
            else:
                behind = -wait * self.time_scale
                self.worst_late_s = max(self.worst_late_s, behind)
                if behind > LATE_S:
                    self.late += 1
                await asyncio.sleep(0)  # catching up: still let the sends run
            yield due

    def _caller_rate_times(self) -> Iterator[float]:
        """Arrivals at the rate the caller sets: each gap drawn at the rate of the moment,
        from the last arrival (or from now, after the rate was 0); -1 while it is 0."""
        rng = random.Random(self.seed)
        due = 0.0
        while True:
            if self.offered() <= 0:
                due = max(due, self.sim_now())
                yield -1.0
                continue
            due += rng.expovariate(1.0) / self.offered()
            yield due

    async def _run(self) -> None:
        cfg = BenchConfig(
            base_url="http://unused",
            endpoint="/v1/completions",
            model=self.model,
            dataset=self.dataset,
            num_prompts=None,
        )
        turn = itertools.count()
        headers = {"Content-Type": "application/json"}
        index = 0
        async with make_client(None, 3600.0) as client:
            async for _ in self._arrivals():
                self.scheduled += 1
                ready = self.endpoints()
                if not ready:
                    self.no_endpoint += 1
                    continue
                if self.in_flight >= MAX_IN_FLIGHT:
                    self.too_busy += 1
                    continue
                self.sent += 1
                start = next(turn)
                base = min(
                    (ready[(start + i) % len(ready)] for i in range(len(ready))),
                    key=lambda url: self._busy.get(url, 0),
                )
                sample = self.dataset.request(index)
                index += 1
                body = request_body(cfg, sample)
                task = asyncio.create_task(
                    self._one(
                        client,
                        base,
                        cfg.endpoint,
                        body,
                        sample.prompt_len,
                        sample.expected_output_len,
                        headers,
                    )
                )
                self._pending.add(task)
                task.add_done_callback(self._pending.discard)
            # The schedule ended: the requests still in flight keep the session open.
            while self._pending:
                await asyncio.gather(*list(self._pending), return_exceptions=True)

    async def _one(
        self,
        client: aiohttp.ClientSession,
        base: str,
        endpoint: str,
        body: bytes,
        prompt_len: int,
        output_len: int,
        headers: dict[str, str],
    ) -> None:
        self.in_flight += 1
        self._busy[base] = self._busy.get(base, 0) + 1
        sent = time.monotonic()
        try:
            # A pod stopped mid-stream (a scale-down whose drain ran out) is a failed output.
            output = await send_one(client, base + endpoint, body, prompt_len, False, headers)
        finally:
            self.in_flight -= 1
            self._busy[base] -= 1
        self.finished.append(Finished(sent, output, output_len))

    def offered_at(self, t: float) -> float:
        return self.offered(t)

    # --- what it measured, in simulated seconds ------------------------------------------

    def window(self, since: float) -> list[Finished]:
        """Requests sent at or after `since` (monotonic) that have finished."""
        return [f for f in self.finished if f.sent >= since]

    def attainment(self, since: float, ttft_s: float, tpot_s: float) -> float | None:
        """Fraction of successful requests sent since `since` meeting both SLO bounds."""
        done = [f for f in self.window(since) if f.output.success]
        if not done:
            return None
        good = sum(1 for f in done if self.meets(f, ttft_s, tpot_s))
        return good / len(done)

    def meets(self, f: Finished, ttft_s: float, tpot_s: float) -> bool:
        ttft = f.output.ttft * self.time_scale
        tpot = tpot_seconds(f.output, f.output_len)
        tpot = 0.0 if tpot is None else tpot * self.time_scale
        return ttft <= ttft_s and tpot <= tpot_s


def quantile(values: list[float], q: float) -> float:
    if not values:
        return math.nan
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, math.ceil(q * len(ordered)) - 1))]
