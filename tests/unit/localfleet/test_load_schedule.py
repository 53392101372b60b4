"""The local fleet's load keeps an absolute schedule: arrival times are a pure function of
the schedule and the seed (a non-homogeneous Poisson process), every arrival is either sent
or counted as not sent (and why), and a send that runs late is counted, not skipped."""

from __future__ import annotations

import math
from collections.abc import AsyncIterator, Callable

import pytest
from aiohttp.test_utils import TestServer

from tests.support.step_timers import Roofline
from tokenfleet.bench.dataset import DatasetSpec
from tokenfleet.localfleet.demo import Schedule
from tokenfleet.localfleet.load import LoadGenerator, arrival_times, next_arrival
from tokenfleet.scheduling.core import SchedulerConfig
from tokenfleet.sim.server import SimSettings, build_app


def test_next_arrival_integrates_the_rate() -> None:
    # 2 req/s: the integral reaches 1.0 after 0.5 s; a ramp 0 -> 2 over 2 s reaches 1 at 1 s.
    assert next_arrival(lambda t: 2.0, 10.0, 1.0, 100.0) == pytest.approx(10.5)
    assert next_arrival(lambda t: t, 0.0, 0.5, 100.0) == pytest.approx(1.0, abs=0.05)
    assert next_arrival(lambda t: 0.0, 0.0, 0.1, 30.0) is None


@pytest.mark.parametrize(
    "schedule",
    [
        Schedule((180, 1020, 600), 600, low=0.24, high=1.6),  # the demo's ramp
        Schedule((180, 720, 900), 0, low=0.24, high=1.6),  # its spike
        Schedule((60, 240, 60), 120, low=0.24, high=0.8),  # its install check
    ],
)
def test_arrivals_follow_the_schedule(schedule: Schedule) -> None:
    times = list(arrival_times(schedule.rate, schedule.end, seed=0))
    assert times == list(arrival_times(schedule.rate, schedule.end, seed=0))  # seeded
    assert times == sorted(times) and times[0] >= 0 and times[-1] < schedule.end
    expected = schedule.expected()
    assert abs(len(times) - expected) < 4 * math.sqrt(expected)  # a Poisson count
    # Each phase gets its share: the base load's arrivals before the rise.
    base = schedule.phases[0] * schedule.low
    early = sum(1 for t in times if t < schedule.phases[0])
    assert abs(early - base) < 4 * math.sqrt(base) + 1


def test_a_rate_of_zero_sends_nothing() -> None:
    assert list(arrival_times(lambda t: 0.0 if t < 500 else 1.0, 400.0, seed=1)) == []


@pytest.fixture
async def sim_url() -> AsyncIterator[str]:
    config = SchedulerConfig(
        kv_cache_tokens=65536, max_num_seqs=64, max_num_batched_tokens=2048, max_model_len=4096
    )
    settings = SimSettings(served_model="m", engine="vllm", config=config, time_scale=50.0)
    server = TestServer(build_app(settings, Roofline(overhead=0.01, per_prefill_token=0.0)))
    await server.start_server()
    yield str(server.make_url("")).rstrip("/")
    await server.close()


async def run_load(
    schedule: Schedule, endpoints: Callable[[], list[str]], time_scale: float
) -> LoadGenerator:
    """The schedule's whole load, of small requests, sent to what `endpoints` lists."""
    load = LoadGenerator(
        endpoints=endpoints,
        model="m",
        dataset=DatasetSpec(input_len=16, output_len=8),
        time_scale=time_scale,
        schedule=schedule.rate,
        end_s=schedule.end,
    )
    await load.start()
    try:
        await load.finish()
    finally:
        await load.close()
    return load


@pytest.mark.slow  # over a second: the unit-slow tier
async def test_every_arrival_is_sent_on_its_schedule(sim_url: str) -> None:
    schedule = Schedule((20, 40, 20), 20, low=1.0, high=2.0)
    load = await run_load(schedule, lambda: [sim_url], time_scale=50.0)
    drawn = list(arrival_times(schedule.rate, schedule.end, seed=0))
    assert load.scheduled == len(drawn) and load.sent == load.scheduled
    assert load.dropped == 0 and load.late <= load.sent
    assert len(load.finished) == load.sent
    failed = [f.output.error for f in load.finished if not f.output.success]
    assert not failed, failed[:3]


async def test_arrivals_with_no_ready_replica_are_counted_not_sent() -> None:
    schedule = Schedule((10, 10, 10), 0, low=2.0, high=2.0)
    load = await run_load(schedule, list, time_scale=100.0)
    assert load.sent == 0 and load.no_endpoint == load.scheduled > 0
