"""Arrival process: inf rate, Poisson/gamma gaps, normalisation, regular spacing."""

from __future__ import annotations

import math
import random
import statistics

import pytest

from tokenfleet.bench.arrival import arrival_offsets, iter_arrivals


def test_infinite_rate_sends_everything_at_once() -> None:
    assert arrival_offsets(5, math.inf, 1.0, random.Random(0)) == [0.0] * 5


@pytest.mark.parametrize(("count", "rate"), [(1, 2.0), (10, 5.0), (1000, 200.0)])
def test_last_arrival_is_normalised_to_count_over_rate(count: int, rate: float) -> None:
    offsets = arrival_offsets(count, rate, 1.0, random.Random(7))
    assert offsets[-1] == pytest.approx(count / rate)
    assert offsets == sorted(offsets)
    assert offsets[0] > 0


def test_infinite_burstiness_is_perfectly_regular() -> None:
    offsets = arrival_offsets(4, 2.0, math.inf, random.Random(0))
    assert offsets == pytest.approx([0.5, 1.0, 1.5, 2.0])


@pytest.mark.parametrize(
    ("burstiness", "expected_cv"),
    [(1.0, 1.0), (4.0, 0.5), (0.25, 2.0)],  # gamma gaps: cv = 1 / sqrt(shape)
)
def test_gap_variability_follows_burstiness(burstiness: float, expected_cv: float) -> None:
    stream = iter_arrivals(10.0, burstiness, random.Random(11))
    times = [next(stream) for _ in range(20000)]
    gaps = [b - a for a, b in zip([0.0, *times], times, strict=False)]
    mean = statistics.fmean(gaps)
    assert mean == pytest.approx(0.1, rel=0.05)
    assert statistics.pstdev(gaps) / mean == pytest.approx(expected_cv, rel=0.1)


def test_seeded_schedules_repeat() -> None:
    a = arrival_offsets(20, 3.0, 1.0, random.Random(5))
    b = arrival_offsets(20, 3.0, 1.0, random.Random(5))
    assert a == b


@pytest.mark.parametrize(
    ("rate", "burstiness", "flag"),
    [(0.0, 1.0, "--request-rate"), (-1.0, 1.0, "--request-rate"), (1.0, 0.0, "--burstiness")],
)
def test_invalid_parameters_name_the_flag(rate: float, burstiness: float, flag: str) -> None:
    with pytest.raises(ValueError, match=flag):
        arrival_offsets(3, rate, burstiness, random.Random(0))
