"""vLLM's --long-prefill-token-threshold as the schedulers model it: while another request
runs or waits, a long prompt computes at most the threshold per step, so a short prompt
behind it gets budget in the same step; alone, it takes the whole budget (vLLM 0.32's
Scheduler.schedule: the cap applies only when num_running + num_waiting > 1)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from tests.support.scheduler_runs import fast_replica_run
from tests.support.step_timers import Roofline
from tokenfleet.scheduling.core import Arrival, SchedulerConfig, simulate

# A compute-bound prefill: 0.1 ms a prompt token, 5 ms a step.
TIMER = Roofline(0.005, 1e-4, 1e-5, 1e-8)
CONFIG = SchedulerConfig(200_000, 64, 2048, 8192)
LONG, SHORT = 7000, 300


def _exact(config: SchedulerConfig, arrivals: list[Arrival]) -> list[float]:
    return [r.first_token_at - r.arrival for r in simulate(config, TIMER, arrivals)]  # type: ignore[operator]


def _fleet(config: SchedulerConfig, arrivals: list[Arrival]) -> list[float]:
    return [r.ttft for r in fast_replica_run(config, TIMER, arrivals)]


@pytest.mark.parametrize("model", [_exact, _fleet], ids=["scheduler", "fleetsim"])
def test_a_short_prompt_behind_a_long_one_gets_its_first_token_sooner(model) -> None:
    arrivals = [Arrival(0.0, LONG, 4), Arrival(0.01, SHORT, 4)]
    _, without = model(CONFIG, arrivals)
    _, capped = model(replace(CONFIG, long_prefill_token_threshold=512), arrivals)
    # Without the cap the short prompt waits for all of the long prefill's full-budget
    # chunks (about 0.2 s each); with it, it waits for the step in flight when it arrived
    # (the long prompt was alone then: uncapped) and is prefilled in the next one.
    assert without > 0.7
    assert capped < 0.35


@pytest.mark.parametrize("model", [_exact, _fleet], ids=["scheduler", "fleetsim"])
def test_a_lone_long_prompt_is_not_capped(model) -> None:
    arrivals = [Arrival(0.0, LONG, 4)]
    (without,) = model(CONFIG, arrivals)
    (capped,) = model(replace(CONFIG, long_prefill_token_threshold=512), arrivals)
    assert capped == pytest.approx(without)  # ceil(7000 / 2048) steps either way


def test_the_long_prompt_pays_for_the_room_it_leaves() -> None:
    """The cap moves work, it does not remove it: the long prompt finishes later."""
    arrivals = [Arrival(0.0, LONG, 4), Arrival(0.01, SHORT, 4)]
    long_without, _ = _exact(CONFIG, arrivals)
    long_capped, _ = _exact(replace(CONFIG, long_prefill_token_threshold=512), arrivals)
    assert long_capped > long_without
