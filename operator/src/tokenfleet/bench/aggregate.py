"""Aggregate per-request measurements into `vllm bench serve` metrics (pure).

Definitions follow vLLM's benchmark so the numbers are comparable:
- TTFT: send -> first streamed chunk carrying a choice.
- ITL: gaps between consecutive streamed chunks of one request.
- TPOT per request: (e2e latency - TTFT) / (output tokens - 1), only when > 1 token.
- E2EL: send -> last streamed chunk.
- goodput: requests meeting every given SLO (ms) / benchmark duration; a request with at
  most one output token counts TPOT as 0, like vLLM.
Percentiles interpolate linearly between order statistics (numpy's default) and std is the
population std (numpy's default), so results match numpy-based tooling without numpy.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

METRIC_NAMES: tuple[str, ...] = ("ttft", "tpot", "itl", "e2el")
GOODPUT_NAMES: tuple[str, ...] = ("ttft", "tpot", "e2el")


@dataclass(slots=True)
class RequestOutput:
    """What one request measured. Times in seconds (perf_counter based)."""

    prompt_len: int
    success: bool = False
    output_tokens: int = 0
    ttft: float = 0.0
    itl: list[float] = field(default_factory=list)
    latency: float = 0.0
    start_time: float = 0.0
    error: str = ""
    generated_text: str = ""


@dataclass(frozen=True, slots=True)
class Distribution:
    """mean / median / std and the asked percentiles of one metric, in milliseconds."""

    mean: float
    median: float
    std: float
    percentiles: tuple[tuple[float, float], ...]


@dataclass(frozen=True, slots=True)
class BenchmarkMetrics:
    completed: int
    failed: int
    total_input: int
    total_output: int
    duration: float
    request_throughput: float
    request_goodput: float
    output_throughput: float
    total_token_throughput: float
    max_output_tokens_per_s: float
    max_concurrent_requests: int
    output_lens: tuple[int, ...]
    distributions: dict[str, Distribution]


def percentile(sorted_values: list[float], p: float) -> float:
    """p-th percentile (0-100) of already sorted values, linear interpolation (numpy)."""
    if not sorted_values:
        return 0.0
    rank = (len(sorted_values) - 1) * p / 100.0
    low = math.floor(rank)
    high = min(low + 1, len(sorted_values) - 1)
    return sorted_values[low] + (sorted_values[high] - sorted_values[low]) * (rank - low)


def distribution(values_s: list[float], percentiles: tuple[float, ...]) -> Distribution:
    """Distribution in ms of values given in seconds; all zeros when there are none."""
    if not values_s:
        return Distribution(0.0, 0.0, 0.0, tuple((p, 0.0) for p in percentiles))
    ordered = sorted(values_s)
    n = len(ordered)
    mean = math.fsum(ordered) / n
    std = math.sqrt(math.fsum((v - mean) ** 2 for v in ordered) / n)
    return Distribution(
        mean=mean * 1000.0,
        median=percentile(ordered, 50.0) * 1000.0,
        std=std * 1000.0,
        percentiles=tuple((p, percentile(ordered, p) * 1000.0) for p in percentiles),
    )


def tpot_seconds(output: RequestOutput, output_len: int) -> float | None:
    """Per-request time per output token after the first; None for <= 1 token."""
    if output_len <= 1:
        return None
    return (output.latency - output.ttft) / (output_len - 1)


def is_good(output: RequestOutput, output_len: int, slo_ms: dict[str, float]) -> bool:
    """True when the request meets every SLO given (values in ms)."""
    measured = {
        "ttft": output.ttft,
        "tpot": tpot_seconds(output, output_len) or 0.0,
        "e2el": output.latency,
    }
    return all(measured[name] <= limit / 1000.0 for name, limit in slo_ms.items())


def peak_concurrency(intervals: list[tuple[float, float]]) -> int:
    """Most requests in flight at one instant (a sweep over start/end events).

    vLLM buckets by whole seconds, which over-counts short requests; the true overlap is
    what a capacity plan's max_concurrency is compared with. Ends sort before starts at
    the same instant so back-to-back requests do not count as overlapping.
    """
    events = [(start, 1) for start, _ in intervals] + [(end, -1) for _, end in intervals]
    events.sort(key=lambda e: (e[0], e[1]))
    peak = current = 0
    for _, step in events:
        current += step
        peak = max(peak, current)
    return peak


def peak_output_tokens_per_s(outputs: list[RequestOutput]) -> float:
    """Most output chunks received in any one whole second since the first send (as vLLM)."""
    ok = [o for o in outputs if o.success]
    if not ok:
        return 0.0
    origin = min(o.start_time for o in ok)
    buckets: dict[int, int] = {}
    for o in ok:
        t = o.start_time + o.ttft
        buckets[int(t - origin)] = buckets.get(int(t - origin), 0) + 1
        for gap in o.itl:
            t += gap
            buckets[int(t - origin)] = buckets.get(int(t - origin), 0) + 1
    return float(max(buckets.values()))


def aggregate(
    outputs: list[RequestOutput],
    duration: float,
    percentiles: tuple[float, ...] = (99.0,),
    goodput_slo_ms: dict[str, float] | None = None,
) -> BenchmarkMetrics:
    """All benchmark metrics from the per-request outputs and the wall-clock duration."""
    slo = goodput_slo_ms or {}
    ttfts: list[float] = []
    tpots: list[float] = []
    itls: list[float] = []
    e2els: list[float] = []
    output_lens: list[int] = []
    total_input = completed = good = 0
    for o in outputs:
        if not o.success:
            output_lens.append(0)
            continue
        completed += 1
        total_input += o.prompt_len
        n_out = o.output_tokens
        output_lens.append(n_out)
        ttfts.append(o.ttft)
        e2els.append(o.latency)
        itls.extend(o.itl)
        tpot = tpot_seconds(o, n_out)
        if tpot is not None:
            tpots.append(tpot)
        if slo and is_good(o, n_out, slo):
            good += 1
    total_output = sum(output_lens)
    per_s = 1.0 / duration if duration > 0 else 0.0
    intervals = [(o.start_time, o.start_time + o.latency) for o in outputs if o.success]
    return BenchmarkMetrics(
        completed=completed,
        failed=len(outputs) - completed,
        total_input=total_input,
        total_output=total_output,
        duration=duration,
        request_throughput=completed * per_s,
        request_goodput=good * per_s,
        output_throughput=total_output * per_s,
        total_token_throughput=(total_input + total_output) * per_s,
        max_output_tokens_per_s=peak_output_tokens_per_s(outputs),
        max_concurrent_requests=peak_concurrency(intervals),
        output_lens=tuple(output_lens),
        distributions={
            "ttft": distribution(ttfts, percentiles),
            "tpot": distribution(tpots, percentiles),
            "itl": distribution(itls, percentiles),
            "e2el": distribution(e2els, percentiles),
        },
    )


def parse_goodput(pairs: list[str] | None) -> dict[str, float]:
    """`--goodput ttft:500 tpot:50` -> {"ttft": 500.0, "tpot": 50.0} (milliseconds)."""
    slo: dict[str, float] = {}
    for pair in pairs or []:
        name, sep, value = pair.partition(":")
        if not sep:
            raise ValueError(f"--goodput {pair!r}: expected NAME:MS, e.g. ttft:500")
        if name not in GOODPUT_NAMES:
            raise ValueError(
                f"--goodput {pair!r}: unknown SLO {name!r}; use {', '.join(GOODPUT_NAMES)}"
            )
        try:
            ms = float(value)
        except ValueError:
            raise ValueError(
                f"--goodput {pair!r}: {value!r} is not a number of milliseconds"
            ) from None
        if ms < 0:
            raise ValueError(f"--goodput {pair!r}: the SLO must be >= 0 ms")
        slo[name] = ms
    return slo


def parse_metric_names(text: str) -> tuple[str, ...]:
    """`--percentile-metrics ttft,tpot` -> ("ttft", "tpot"), checking each name."""
    names = tuple(n.strip() for n in text.split(",") if n.strip())
    for name in names:
        if name not in METRIC_NAMES:
            raise ValueError(
                f"--percentile-metrics {text!r}: unknown metric {name!r}; "
                f"use a comma list of {', '.join(METRIC_NAMES)}"
            )
    return names


def parse_percentiles(text: str) -> tuple[float, ...]:
    """`--metric-percentiles 50,90,99` -> (50.0, 90.0, 99.0), each in [0, 100]."""
    out: list[float] = []
    for item in text.split(","):
        item = item.strip()
        if not item:
            continue
        try:
            p = float(item)
        except ValueError:
            raise ValueError(
                f"--metric-percentiles {text!r}: {item!r} is not a number; e.g. 50,90,99"
            ) from None
        if not 0.0 <= p <= 100.0:
            raise ValueError(f"--metric-percentiles {text!r}: {item} is outside 0-100")
        out.append(p)
    return tuple(out)
