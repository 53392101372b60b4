"""The demo tells a busy machine from an outage: the engines' lost virtual time and the load
generator's late sends, sample by sample, in the view and in the summary's verdict; and the
summary says what the load generator was asked for, sent and could not send."""

from __future__ import annotations

import pytest

from tokenfleet.localfleet.observe import Row, Slo
from tokenfleet.localfleet.timescale import (
    BEHIND_LIMIT,
    ClockReading,
    Sample,
    behind,
    verdict,
)
from tokenfleet.localfleet.view import load_line, row_line, summary

SLO = Slo(ttft_s=1.0, tpot_s=0.1, quantile=0.95, attainment=0.99)


@pytest.mark.parametrize(
    ("lost", "share"),
    [(0.0, 0.0), (5.0, 0.05), (30.0, 0.3), (-1.0, 0.0), (500.0, 1.0)],
)
def test_behind_is_the_share_of_the_time_scale_lost(lost: float, share: float) -> None:
    # 10 wall seconds at 10x: 100 virtual seconds were due.
    before, after = ClockReading(100.0, 2.0), ClockReading(110.0, 2.0 + lost)
    assert behind(before, after, 10.0) == pytest.approx(share)


def _row(t: float, clock: Sample | None) -> Row:
    return Row(t, 1.2, 2, 2, 2, 0.5, 0.99, 1.19, "feedforward: ok", None, 1.2, clock)


def test_a_row_says_when_the_machine_fell_behind() -> None:
    kept = row_line(_row(60, Sample(60, 0.01, 0)), SLO, 10.0)
    assert "machine behind" not in kept
    slow = row_line(_row(80, Sample(80, 0.3, 4)), SLO, 10.0)
    assert "[machine behind: engines at 70% of 10x, 4 request(s) sent late]" in slow


def test_the_verdict_names_the_samples_that_did_not_keep_the_time_scale() -> None:
    kept = [Sample(20.0 * i, BEHIND_LIMIT / 2, 0) for i in range(10)]
    assert verdict(kept, 10.0, 0.2).startswith("time scale: kept at 10x")
    slow = [*kept, Sample(220.0, 0.4, 3), Sample(240.0, 0.2, 0)]
    line = verdict(slow, 10.0, 4.5)
    assert line.startswith("time scale: NOT kept in 2 of 12 samples (from 3.7 simulated min")
    assert "down to 60% of 10x" in line and "3 request(s) sent late" in line
    assert "--time-scale" in line


STATS = {
    "finished": 1230,
    "failed": 0,
    "expected": 1243.4,
    "scheduled": 1251,
    "sent": 1240,
    "no_endpoint": 11,
    "too_busy": 0,
    "late": 2,
    "worst_late_s": 1.7,
    "attainment": 0.981,
    "goodput": 0.7,
}


def test_the_load_line_counts_what_was_asked_for_sent_and_not_sent() -> None:
    line = load_line(STATS)
    assert "1251 arrivals drawn on the schedule (it asks for 1243 on average)" in line
    assert "1240 sent (99.1%)" in line and "11 with no ready replica" in line
    assert "2 sent more than 1 simulated s late (up to 1.7 s)" in line


def test_the_summary_ends_with_the_time_scale_verdict() -> None:
    rows = [_row(20.0 * i, Sample(20.0 * i, 0.0, 0)) for i in range(1, 5)]
    lines = summary(rows, SLO, 1, STATS, 10.0)
    assert lines[1].startswith("load: ") and lines[-1].startswith("time scale: kept at 10x")
