"""What Prometheus would show about the modelled fleet: windowed rates, histogram quantiles
and SLO attainment over the engines' own buckets, and per-replica gauges.

The same arithmetic `autoscale.signals` asks Prometheus for, on the simulated requests:
`rate(...[1m])`, `histogram_quantile(q, ...)` with linear interpolation inside a bucket,
attainment = bucket{le <= SLO} / count (the safe rounding down to a bucket boundary).
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field

from tokenfleet.autoscale import dispersion
from tokenfleet.autoscale.types import Signals
from tokenfleet.engines import vllm

RATE_WINDOW_S = 60.0  # rate(...[1m]): the window the signals are computed over
SCRAPE_INTERVAL_S = 15.0  # Prometheus scrape interval; also the decision cadence
# vLLM's bucket boundaries, from the engine registry: TTFT, queue time
# (vllm:request_queue_time_seconds) and per-request TPOT (0.11+).
TTFT_BUCKETS = vllm.TTFT_BUCKETS
QUEUE_BUCKETS = vllm.REQUEST_LATENCY_BUCKETS
# The request mix changes slowly: its length histograms are read over 10 minutes
# (increase(...[10m])), so a 1% tail is not three requests of one minute.
MIX_WINDOW_S = 600.0
TPOT_BUCKETS = vllm.ITL_BUCKETS


def histogram_quantile(q: float, values: list[float], buckets: tuple[float, ...]) -> float | None:
    """Prometheus' histogram_quantile over `values` observed into `buckets` (None: 0/0)."""
    if not values:
        return None
    counts = [0] * (len(buckets) + 1)
    for v in values:
        counts[bisect.bisect_left(buckets, v)] += 1
    rank = q * len(values)
    cumulative = 0
    for index, count in enumerate(counts):
        if cumulative + count >= rank and count:
            if index == len(buckets):
                return buckets[-1]  # +Inf bucket: Prometheus returns the highest finite bound
            lower = buckets[index - 1] if index else 0.0
            return lower + (buckets[index] - lower) * (rank - cumulative) / count
        cumulative += count
    return buckets[-1]


def resolved_quantile(q: float, values: list[float], buckets: tuple[float, ...]) -> float | None:
    """histogram_quantile, but 0 when the rank falls in the first bucket: inside it the
    interpolation only restates the bucket's width (vLLM's queue-time histogram starts at
    0.3 s, so waits of a few ms read ~0.29 s). Waits the histogram cannot resolve are left
    to the attainment signal, which is exact at the SLO's bucket."""
    value = histogram_quantile(q, values, buckets)
    return 0.0 if value is not None and value < buckets[0] else value


def attainment(values: list[float], limit: float, buckets: tuple[float, ...]) -> float | None:
    """Fraction of `values` <= the largest bucket bound <= limit (None: 0/0)."""
    if not values:
        return None
    index = bisect.bisect_right(buckets, limit + 1e-12) - 1
    bound = buckets[index] if index >= 0 else 0.0
    return sum(1 for v in values if v <= bound) / len(values)


@dataclass
class Window:
    """Events of the last RATE_WINDOW_S: first tokens (time, ttft) and finishes (time, tpot),
    queue waits (time, seconds); prompt lengths (time, tokens) of the last MIX_WINDOW_S."""

    first_tokens: list[tuple[float, float]]
    finishes: list[tuple[float, float]]
    waits: list[tuple[float, float]] = field(default_factory=list)
    prompts: list[tuple[float, int]] = field(default_factory=list)
    outputs: list[tuple[float, int]] = field(default_factory=list)  # finishes, as prompts
    # First-token times of the last dispersion.WINDOW_SECONDS (the TTFT histogram's count).
    arrivals: list[float] = field(default_factory=list)

    def prune(self, now: float) -> None:
        start = now - RATE_WINDOW_S
        self.first_tokens = [e for e in self.first_tokens if e[0] > start]
        self.finishes = [e for e in self.finishes if e[0] > start]
        self.waits = [e for e in self.waits if e[0] > start]
        mix_start = now - MIX_WINDOW_S
        if self.prompts and self.prompts[0][0] <= mix_start:
            self.prompts = [e for e in self.prompts if e[0] > mix_start]
        if self.outputs and self.outputs[0][0] <= mix_start:
            self.outputs = [e for e in self.outputs if e[0] > mix_start]
        idc_start = now - dispersion.WINDOW_SECONDS
        if self.arrivals and self.arrivals[0] <= idc_start:
            self.arrivals = [t for t in self.arrivals if t > idc_start]


def arrival_dispersion(arrivals: list[float], now: float) -> float | None:
    """What signals.arrival_dispersion_query asks Prometheus: the index of dispersion of
    the counts per dispersion.BIN_SECONDS over the window (None: the window is not full)."""
    width = dispersion.BIN_SECONDS
    if not arrivals or arrivals[0] > now - dispersion.WINDOW_SECONDS + width:
        return None
    counts = [0.0] * dispersion.BINS
    for t in arrivals:
        k = int((now - t) // width)
        if 0 <= k < dispersion.BINS:
            counts[k] += 1
    return dispersion.index_of_dispersion(counts)


def signals(
    window: Window,
    now: float,
    *,
    quantile: float,
    ttft_slo_s: float,
    tpot_slo_s: float,
    reporting: int,
    running: list[int],
    waiting: list[int],
    kv_usage: list[float],
) -> Signals:
    ttfts = [ttft for at, ttft in window.first_tokens if at <= now]
    waits = [wait for at, wait in window.waits if at <= now]
    tpots = [tpot for at, tpot in window.finishes if at <= now]
    rate = len(tpots) / RATE_WINDOW_S
    a = attainment(ttfts, ttft_slo_s, TTFT_BUCKETS)
    b = attainment(tpots, tpot_slo_s, TPOT_BUCKETS)
    goodput = rate * max(0.0, a + b - 1) if a is not None and b is not None else None
    n = max(len(running), 1)
    return Signals(
        at=now,
        reporting_replicas=reporting,
        request_rate=rate,
        ttft_quantile_seconds=histogram_quantile(quantile, ttfts, TTFT_BUCKETS),
        ttft_attainment=a,
        tpot_attainment=b,
        goodput=goodput,
        running_per_replica=sum(running) / n,
        waiting_per_replica=sum(waiting) / n,
        kv_usage=sum(kv_usage) / n if kv_usage else None,
        newest_sample_age_seconds=SCRAPE_INTERVAL_S / 2,  # on average half a scrape old
        queue_wait_quantile_seconds=resolved_quantile(quantile, waits, QUEUE_BUCKETS),
        arrival_dispersion=arrival_dispersion(window.arrivals, now),
    )
