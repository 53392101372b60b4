"""Request traces for `tokenfleet autoscale-sim`: built-in synthetic shapes and Azure CSVs.

The public traces (Azure LLM inference 2023/2024, BurstGPT, Mooncake) cannot be downloaded
here, so the built-in ones reproduce their shapes at a modest scale (30 simulated minutes,
a 2-hour "day" for `diurnal`, a few to tens of req/s); recorded traces (Azure CSV, plain CSV,
JSONL) are read by fleetsim.tracefiles. Everything is seeded: the same name and seed give
the same requests.
"""

from __future__ import annotations

import itertools
import math
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from tokenfleet.autoscale.fleetsim.tracefiles import Dropped, read_rows
from tokenfleet.errors import UserError

DURATION_S = 1800.0  # 30 simulated minutes: long enough for a 300 s window to matter twice
# A day compressed into 2 hours (12x): its ramps are still 12x steeper than a real day's,
# but no longer 48x (a 30-minute day ramped by a replica's worth of load every cold start,
# which tested the trace's compression, not the policy), and `--policy all` stays ~15 s.
DAY_S = 7200.0
# Request sizes of Azure's 2023 "conv" trace (median 1,020 in / 129 out), lognormal tails.
PROMPT_MEDIAN, PROMPT_SIGMA, PROMPT_MAX = 1020, 0.6, 4096
OUTPUT_MEDIAN, OUTPUT_SIGMA, OUTPUT_MAX = 129, 0.7, 1024
BUILT_IN = ("steady", "diurnal", "spike", "bursty")


@dataclass(frozen=True)
class TraceRequest:
    at: float  # seconds from the start of the trace
    prompt: int
    output: int
    blocks: tuple[int, ...] = ()  # prefix block ids (Mooncake's hash_ids), if the trace has them


@dataclass(frozen=True)
class Trace:
    name: str
    requests: tuple[TraceRequest, ...]
    duration: float
    arrival_cv: float = 1.0
    """Coefficient of variation of inter-arrival times at a steady rate (Poisson: 1): the
    capacity the baselines get is measured with arrivals this bursty."""
    dropped: Dropped = field(default_factory=Dropped)
    """Rows of a recorded trace left out (unreadable, or more than the model serves)."""

    def rate_per_bucket(self, bucket: float) -> list[float]:
        """Arrivals per second in consecutive buckets of `bucket` seconds."""
        counts = [0] * max(1, math.ceil(self.duration / bucket))
        for r in self.requests:
            counts[min(int(r.at // bucket), len(counts) - 1)] += 1
        return [c / bucket for c in counts]


# Rate profiles in req/s over t in [0, DURATION_S).
def _steady(t: float) -> float:
    return 20.0


def _diurnal(t: float) -> float:
    # A day compressed into DAY_S: night 6 req/s, midday peak 36 req/s.
    return 6.0 + 30.0 * (0.5 - 0.5 * math.cos(2 * math.pi * t / DAY_S))


def _spike(t: float) -> float:
    # 10 req/s, a 4x spike for 5 minutes at minute 10 (a launch, a batch job).
    return 40.0 if 600.0 <= t < 900.0 else 10.0


def _bursty(t: float) -> float:
    # Mean rate drifting 10 <-> 30 req/s; the burstiness comes from gamma inter-arrivals.
    return 20.0 + 10.0 * math.sin(2 * math.pi * t / 900.0)


PROFILES: dict[str, Callable[[float], float]] = {
    "steady": _steady,
    "diurnal": _diurnal,
    "spike": _spike,
    "bursty": _bursty,
}
DURATIONS: dict[str, float] = {"diurnal": DAY_S}  # the others: DURATION_S
BURSTY_CV = 2.0  # coefficient of variation of inter-arrivals (Poisson: 1), BurstGPT-like


def synthetic(name: str, seed: int = 0) -> Trace:
    if name not in PROFILES:
        raise UserError(
            "--trace", name, "is not a built-in trace", f"use one of {BUILT_IN} or a .csv file"
        )
    rng = random.Random(f"{name}:{seed}")
    profile = PROFILES[name]
    cv = BURSTY_CV if name == "bursty" else 1.0
    shape = 1.0 / cv**2  # gamma shape; 1 = exponential
    duration = DURATIONS.get(name, DURATION_S)
    peak = max(profile(t) for t in range(int(duration)))
    requests: list[TraceRequest] = []
    t = 0.0
    while True:
        # Thinning of a gamma renewal process at the peak rate: exact for Poisson, and keeps
        # the burst structure of gamma arrivals while the mean follows the profile.
        t += rng.gammavariate(shape, 1.0 / (shape * peak))
        if t >= duration:
            break
        if rng.random() * peak > profile(t):
            continue
        prompt = min(
            PROMPT_MAX, max(16, round(rng.lognormvariate(math.log(PROMPT_MEDIAN), PROMPT_SIGMA)))
        )
        output = min(
            OUTPUT_MAX, max(2, round(rng.lognormvariate(math.log(OUTPUT_MEDIAN), OUTPUT_SIGMA)))
        )
        requests.append(TraceRequest(t, prompt, output))
    return Trace(name, tuple(requests), duration, cv)


def load_csv(path: str | Path, strict: bool = False) -> Trace:
    """A recorded trace file (fleetsim.tracefiles: Azure CSV, plain CSV, JSONL); times are
    shifted to start at 0. Unreadable rows are dropped and counted (`strict`: refused)."""
    rows, dropped = read_rows(path, strict)
    start = min(r[0] for r in rows)
    requests = sorted((TraceRequest(t - start, p, o, b) for t, p, o, b in rows), key=lambda r: r.at)
    duration = max(r.at for r in requests) + 1.0
    return Trace(Path(path).name, tuple(requests), duration, arrival_cv(requests), dropped)


def arrival_cv(requests: tuple[TraceRequest, ...] | list[TraceRequest]) -> float:
    """Burstiness of a recorded trace: the CV of inter-arrival gaps, each gap divided by
    the mean gap of its minute so that a changing rate (a diurnal ramp) does not read as
    bursts. 1.0 when there are too few requests to say."""
    by_minute: dict[int, list[float]] = {}
    for a, b in itertools.pairwise(requests):
        by_minute.setdefault(int(a.at // 60), []).append(b.at - a.at)
    scaled = [
        gap / mean
        for gaps in by_minute.values()
        if len(gaps) >= 10 and (mean := sum(gaps) / len(gaps)) > 0
        for gap in gaps
    ]
    if len(scaled) < 100:
        return 1.0
    mean = sum(scaled) / len(scaled)
    return math.sqrt(sum((x - mean) ** 2 for x in scaled) / len(scaled)) / mean


def load(trace: str, seed: int = 0, strict: bool = False) -> Trace:
    return synthetic(trace, seed) if trace in PROFILES else load_csv(trace, strict)
