"""Open-loop load on the local fleet, through tokenfleet.bench's client.

Poisson arrivals at a rate that the caller changes over time (a load step, a ramp); each
request goes to the ready endpoint with the fewest requests in flight (ties in turn), as an
inference gateway routes (the Gateway API inference extension, llm-d), so a replica that
just became ready takes new work while an overloaded one drains its queue. Each request is
timed by `tokenfleet.bench.client.send_one` exactly as `tokenfleet bench` times it. Rates
are in simulated requests per second: at time scale K the generator sends K times as many
per wall second, and a measured wall-clock latency is multiplied by K.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import math
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import aiohttp

from tokenfleet.bench.aggregate import RequestOutput, tpot_seconds
from tokenfleet.bench.client import BenchConfig, make_client, request_body, send_one
from tokenfleet.bench.dataset import DatasetSpec

# Requests in flight at most: beyond it arrivals are dropped and counted, so a fleet that
# cannot keep up never turns the harness itself into the bottleneck.
MAX_IN_FLIGHT = 2000


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
    rate: float = 0.0  # simulated requests per second; change it at any time
    finished: list[Finished] = field(default_factory=list)
    dropped: int = 0  # no ready endpoint, or too many in flight
    in_flight: int = 0
    _task: asyncio.Task[None] | None = None
    _pending: set[asyncio.Task[None]] = field(default_factory=set)
    _busy: dict[str, int] = field(default_factory=dict)  # requests in flight per endpoint

    async def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="load")

    def check(self) -> None:
        """Raise what stopped the generator, if anything did (a bug must not look idle)."""
        if self._task is not None and self._task.done() and not self._task.cancelled():
            error = self._task.exception()
            if error is not None:
                raise RuntimeError(f"the load generator stopped: {error!r}") from error

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        for task in list(self._pending):
            task.cancel()
        await asyncio.gather(*self._pending, return_exceptions=True)

    async def _run(self) -> None:
        cfg = BenchConfig(
            base_url="http://unused",
            endpoint="/v1/completions",
            model=self.model,
            dataset=self.dataset,
            num_prompts=None,
        )
        rng = random.Random(self.seed)
        turn = itertools.count()
        headers = {"Content-Type": "application/json"}
        async with make_client(None, 3600.0) as client:
            for index in itertools.count():
                wall_rate = self.rate * self.time_scale
                if wall_rate <= 0:
                    await asyncio.sleep(0.1)
                    continue
                await asyncio.sleep(rng.expovariate(wall_rate))
                ready = self.endpoints()
                if not ready or self.in_flight >= MAX_IN_FLIGHT:
                    self.dropped += 1
                    continue
                start = next(turn)
                base = min(
                    (ready[(start + i) % len(ready)] for i in range(len(ready))),
                    key=lambda url: self._busy.get(url, 0),
                )
                sample = self.dataset.request(index)
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
