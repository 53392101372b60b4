"""The simulator reports its own clock on /sim/clock: virtual seconds so far, and those a busy
machine cost it (steps that ended later than the time scale allows are not charged to the
engine, SimEngine.lost_seconds). On a clock that keeps time nothing is lost; on one whose
every sleep overruns, the overrun x the time scale is, unless the overrun is small enough
for the next steps to catch it up (a timer's slack, a step's own bookkeeping)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer

from tests.support.step_timers import Roofline
from tokenfleet.scheduling.core import SchedulerConfig
from tokenfleet.sim.server import SimSettings, build_app

CONFIG = SchedulerConfig(
    kv_cache_tokens=8192, max_num_seqs=8, max_num_batched_tokens=512, max_model_len=1024
)
SCALE = 1000.0
STEP_S = 0.010  # virtual seconds per step, whatever it holds
FLAT = Roofline(overhead=STEP_S, per_prefill_token=0.0)


class OverrunClock:
    """Real time moves only in the engine's sleeps, each `overrun` real seconds longer than
    asked (0: a machine that keeps the time scale)."""

    def __init__(self, overrun: float) -> None:
        self.now = 0.0
        self.overrun = overrun
        self.sleeps = 0

    def time(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.now += seconds + self.overrun
        self.sleeps += 1
        await asyncio.sleep(0)


async def _clock_after_one_request(
    overrun: float, catch_up: float = 0.0
) -> tuple[dict[str, Any], int]:
    settings = SimSettings(
        served_model="m", engine="vllm", config=CONFIG, time_scale=SCALE, catch_up_seconds=catch_up
    )
    clock = OverrunClock(overrun)
    client: TestClient[Any, Any] = TestClient(TestServer(build_app(settings, FLAT, clock)))
    await client.start_server()
    try:
        body = {"model": "m", "prompt": "one two", "max_tokens": 20}
        assert (await client.post("/v1/completions", json=body)).status == 200
        reading = await (await client.get("/sim/clock")).json()
    finally:
        await client.close()
    return reading, clock.sleeps


async def test_a_clock_that_keeps_time_loses_nothing() -> None:
    reading, sleeps = await _clock_after_one_request(0.0)
    assert sleeps >= 20 and reading["lostSeconds"] == pytest.approx(0.0, abs=1e-9)
    assert reading["timeScale"] == SCALE
    assert reading["virtualSeconds"] == pytest.approx(sleeps * STEP_S)


async def test_a_machine_that_overruns_every_step_loses_the_overrun_times_the_scale() -> None:
    overrun = 2e-6  # real seconds per step: 2 ms of virtual time at 1000x
    reading, sleeps = await _clock_after_one_request(overrun)
    assert reading["lostSeconds"] == pytest.approx(sleeps * overrun * SCALE, rel=1e-6)
    # The engine still charged each step its model time, not the overrun.
    assert reading["virtualSeconds"] == pytest.approx(sleeps * STEP_S, rel=1e-6)


async def test_an_overrun_within_the_catch_up_is_made_up_by_the_next_steps() -> None:
    overrun = 2e-6  # as above, but the engine may run up to 1 ms of wall time behind
    reading, sleeps = await _clock_after_one_request(overrun, catch_up=1e-3)
    assert sleeps >= 20 and reading["lostSeconds"] == pytest.approx(0.0, abs=1e-9)
    # Steps follow one another in virtual time; only the last wake-up's overrun is pending.
    assert reading["virtualSeconds"] == pytest.approx(sleeps * STEP_S + overrun * SCALE)


async def test_an_overrun_beyond_the_catch_up_is_given_up_and_counted() -> None:
    overrun = 2e-3  # 2 s of virtual time per step, above a 1 ms catch-up
    reading, sleeps = await _clock_after_one_request(overrun, catch_up=1e-3)
    assert reading["lostSeconds"] == pytest.approx(sleeps * overrun * SCALE, rel=1e-6)
    assert reading["virtualSeconds"] == pytest.approx(sleeps * STEP_S, rel=1e-6)
