"""The simulator's HTTP app in unit tests: a small replica, a flat step time, virtual time
that moves only when the engine waits for a step to end (so results do not depend on the
machine), and test clients started on it and closed at the end."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from aiohttp.test_utils import TestClient, TestServer

from tests.support.step_timers import Roofline
from tokenfleet.scheduling.core import SchedulerConfig
from tokenfleet.sim.server import SimSettings, build_app

# 10 ms per step plus 0.1 ms per prefill token.
FLAT = Roofline(overhead=0.010, per_prefill_token=0.0001)
CONFIG = SchedulerConfig(
    kv_cache_tokens=8192, max_num_seqs=8, max_num_batched_tokens=512, max_model_len=1024
)

Client = TestClient[Any, Any]
StartClient = Callable[[SimSettings, "ManualClock | None"], Awaitable[Client]]


class ManualClock:
    """Time moves only when the engine waits for a step to end: it jumps to that end."""

    def __init__(self) -> None:
        self.now = 0.0

    def time(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.now += seconds
        await asyncio.sleep(0)  # let the HTTP handlers run between steps


@contextlib.asynccontextmanager
async def sim_clients() -> AsyncIterator[StartClient]:
    """start(settings, clock) serves build_app(settings, FLAT, clock) to a new test client;
    every client started is closed when the block ends (clock None: the real clock)."""
    started: list[Client] = []

    async def start(settings: SimSettings, clock: ManualClock | None) -> Client:
        client: Client = TestClient(TestServer(build_app(settings, FLAT, clock)))
        await client.start_server()
        started.append(client)
        return client

    try:
        yield start
    finally:
        for client in started:
            await client.close()
