"""Capacity at the observed mix: a harmonic mean of plan() goodput per length class."""

from __future__ import annotations

import pytest

from tokenfleet.autoscale.attainability import LengthHistogram
from tokenfleet.autoscale.mix import mix_capacity


def test_harmonic_over_classes_and_unservable_left_out() -> None:
    # Half the requests short (10 req/s alone), 40% mid (2 req/s), 10% over the SLO (0).
    prompts = LengthHistogram((1000.0, 5000.0), (50.0, 40.0, 10.0), top=8192.0)
    rates = {500: 10.0, 3000: 2.0, 6596: 0.0}
    seen: list[tuple[int, int]] = []

    def goodput(prompt: int, output: int) -> float:
        seen.append((prompt, output))
        return rates[prompt]

    got = mix_capacity(prompts, 120, goodput)
    assert got is not None
    assert seen == [(500, 120), (3000, 120), (6596, 120)]  # bucket midpoints, mean output
    # 0.9 of the traffic served at 0.5 / 10 + 0.4 / 2 = 0.25 s per request.
    assert got.requests_per_second == pytest.approx(0.9 / 0.25)
    assert mix_capacity(LengthHistogram((1.0,), (0.0, 0.0)), 1, goodput) is None
    assert mix_capacity(prompts, 1, lambda p, o: 0.0).requests_per_second == 0.0  # type: ignore[union-attr]
