"""The autoscaler's loop ticks on a fixed schedule: the wait after a tick is what is left of
the period since it started (issue 30: a 5 s interval ticked every ~6.1 s, so a short queue
blip on the picker could fall between two ticks)."""

from __future__ import annotations

import itertools

import pytest

from tokenfleet.controller.autoscaler_loops import until_next_tick


@pytest.mark.parametrize(
    ("started", "now", "period", "wait"),
    [
        (100.0, 100.0, 5.0, 5.0),  # an instant tick waits the whole period
        (100.0, 101.1, 5.0, 3.9),  # a 1.1 s tick: the next still starts at 105
        (100.0, 105.0, 5.0, 0.0),  # a tick of exactly one period: the next at once
        (100.0, 112.0, 5.0, 0.0),  # an overrun: at once, no burst of missed ticks
        (100.0, 100.2, 0.5, 0.3),  # a time-scaled period
    ],
)
def test_the_next_tick_starts_one_period_after_the_last_started(
    started: float, now: float, period: float, wait: float
) -> None:
    assert until_next_tick(started, now, period) == pytest.approx(wait)


def test_ticks_keep_their_period_whatever_each_one_takes() -> None:
    """Twelve ticks of uneven lengths on a 5 s period start 5 s apart."""
    clock, starts = 0.0, []
    for took in (0.1, 1.1, 0.4, 2.0, 0.0, 4.9, 0.3, 1.0, 0.2, 0.7, 3.3, 0.1):
        starts.append(clock)
        clock += took
        clock += until_next_tick(starts[-1], clock, 5.0)
    assert [b - a for a, b in itertools.pairwise(starts)] == pytest.approx([5.0] * 11)
