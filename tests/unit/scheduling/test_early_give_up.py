"""open_loop's early_give_up (a request counted as missing the SLO once its TTFT is known
to be over it): a run that meets the SLO is the same run to the bit, a run that misses
it still misses it, and some runs that miss stop sooner."""

from __future__ import annotations

import pytest

from tests.support.step_timers import Roofline
from tokenfleet.scheduling.core import SchedulerConfig
from tokenfleet.scheduling.virtual import LoadStats, open_loop

TIMER = Roofline(0.005, 6e-5, 1e-4, 5e-8, 1e-10)  # prefill dominates: bursts queue

CONFIGS = {
    "mixed": SchedulerConfig(300_000, 64, 2048, 8192),
    "kv-bound": SchedulerConfig(20_000, 64, 1024, 8192),
    "prefill-batches": SchedulerConfig(60_000, 64, 2048, 8192, mixed_prefill=False),
}
SHAPES = [[(1500, 120)], [(2500, 40), (300, 200), (900, 90)]]
RATES = (1.0, 3.0, 6.0, 10.0, 16.0, 30.0)


def _passes(stats: LoadStats) -> bool:
    return not stats.saturated and stats.attainment >= 0.95


@pytest.mark.parametrize("name", CONFIGS)
def test_early_give_up_decides_as_the_full_run(name: str) -> None:
    config, timer = CONFIGS[name], TIMER
    outcomes = set()
    for shapes in SHAPES:
        for rate in RATES:
            for overhead in (0.0, 0.03):
                kw = dict(seed=3, warmup=20, request_overhead=overhead, give_up_below=0.95)
                full = open_loop(config, timer, rate, shapes, 90, (0.6, 0.03), **kw)  # type: ignore[arg-type]
                early = open_loop(config, timer, rate, shapes, 90, (0.6, 0.03),
                                  early_give_up=True, **kw)  # type: ignore[arg-type]  # fmt: skip
                assert _passes(early) == _passes(full)
                if _passes(full):
                    assert early == full
                    outcomes.add("passed")
                elif early.requests < full.requests:
                    outcomes.add("stopped sooner")
    assert outcomes == {"passed", "stopped sooner"}


@pytest.mark.parametrize("name", CONFIGS)
def test_a_piled_up_queue_stops_the_decider_once_every_request_is_admitted(name: str) -> None:
    """With an SLO nobody misses, only saturation fails a run: the decider then stops once
    every measured request is scheduled (the verdict's waits are known), with the full
    run's verdict."""
    config, timer = CONFIGS[name], TIMER
    outcomes = set()
    for shapes in SHAPES:
        for rate in RATES:
            kw = dict(seed=5, warmup=20, give_up_below=0.95)
            full = open_loop(config, timer, rate, shapes, 90, (1e9, 1e9), **kw)  # type: ignore[arg-type]
            early = open_loop(config, timer, rate, shapes, 90, (1e9, 1e9),
                              early_give_up=True, **kw)  # type: ignore[arg-type]  # fmt: skip
            assert early.saturated == full.saturated
            if not full.saturated:
                assert early == full
                outcomes.add("sustained")
            else:
                assert early.requests < full.requests
                outcomes.add("stopped once admitted")
    assert outcomes == {"sustained", "stopped once admitted"}
