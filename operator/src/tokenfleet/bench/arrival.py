"""When to send each request (pure): vLLM's arrival process for `--request-rate`.

rate = inf sends everything at once. Otherwise gaps are gamma distributed with shape
`burstiness` and mean 1 / rate: burstiness 1 is a Poisson process, < 1 burstier, > 1 more
even, inf perfectly regular. For a known number of requests the offsets are rescaled so the
last one lands exactly at n / rate, as vLLM does, so throughput does not wobble with the seed.
"""

from __future__ import annotations

import math
import random
from collections.abc import Iterator


def _check(rate: float, burstiness: float) -> None:
    if not rate > 0:
        raise ValueError(f"--request-rate {rate}: must be > 0 (or inf to send all at once)")
    if not burstiness > 0:
        raise ValueError(f"--burstiness {burstiness}: must be > 0 (1 = Poisson)")


def iter_arrivals(rate: float, burstiness: float, rng: random.Random) -> Iterator[float]:
    """Endless send offsets in seconds from the start, for duration-bounded runs."""
    _check(rate, burstiness)
    t = 0.0
    while True:
        if math.isinf(rate):
            yield 0.0
            continue
        if math.isinf(burstiness):
            t += 1.0 / rate
        else:
            t += rng.gammavariate(burstiness, 1.0 / (rate * burstiness))
        yield t


def arrival_offsets(count: int, rate: float, burstiness: float, rng: random.Random) -> list[float]:
    """Send offsets for `count` requests, normalised so the last is at count / rate."""
    _check(rate, burstiness)
    if count <= 0:
        return []
    stream = iter_arrivals(rate, burstiness, rng)
    offsets = [next(stream) for _ in range(count)]
    if math.isinf(rate) or offsets[-1] == 0:
        return offsets
    scale = (count / rate) / offsets[-1]
    return [t * scale for t in offsets]
