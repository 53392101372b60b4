"""A clock for the simulator's engine loop in unit tests: virtual time that moves only when
the engine waits for a step to end, so a test's results do not depend on the machine."""

from __future__ import annotations

import asyncio


class ManualClock:
    """Time moves only when the engine waits for a step to end: it jumps to that end."""

    def __init__(self) -> None:
        self.now = 0.0

    def time(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.now += seconds
        await asyncio.sleep(0)  # let the HTTP handlers run between steps
