"""A generated on-off trace with the character of Azure's 2023 "code" trace (seeded): bursts
of 1-3 minutes at 4-12 req/s on average, whose requests come in clusters (a client sending
a batch at once: geometric, 6 on average, 0.1 s apart), separated by quiet gaps of 30 s to
3 minutes with a trickle of 0-0.5 req/s; long prompts (lognormal, median 1,500 tokens) and
short outputs (median 13). The calibration trace of the standing floor for recurring bursts
(autoscale/bursts.py): its behaviour was checked on seeds 0-2 of this trace, never on the
Azure traces (the test set)."""

from __future__ import annotations

import math
import random

from tokenfleet.autoscale.fleetsim.traces import Trace, TraceRequest

PROMPT_MEDIAN, PROMPT_SIGMA, PROMPT_MAX = 1500, 1.0, 7000
OUTPUT_MEDIAN, OUTPUT_SIGMA, OUTPUT_MAX = 13, 1.2, 500
CLUSTER_MEAN, CLUSTER_GAP_S = 6.0, 0.1
BURST_RATES = (4.0, 12.0)


def onoff_trace(
    seed: int = 0, duration: float = 3600.0, burst_rates: tuple[float, float] = BURST_RATES
) -> Trace:
    rates = "" if burst_rates == BURST_RATES else f":{burst_rates}"
    rng = random.Random(f"onoff:{seed}{rates}")
    times: list[float] = []
    t, bursting = 0.0, False
    rate = rng.uniform(0.0, 0.5)
    end = rng.uniform(30.0, 180.0)
    while t < duration:
        size = CLUSTER_MEAN if bursting else 1.0
        step = rng.expovariate(rate / size) if rate > 0 else math.inf
        if t + step >= end:
            t, bursting = end, not bursting
            rate = rng.uniform(*burst_rates) if bursting else rng.uniform(0.0, 0.5)
            end = t + (rng.uniform(60.0, 180.0) if bursting else rng.uniform(30.0, 180.0))
            continue
        t += step
        at = t
        times.append(at)
        while bursting and rng.random() > 1.0 / size:  # geometric cluster, mean `size`
            at += rng.expovariate(1.0 / CLUSTER_GAP_S)
            times.append(at)
    requests: list[TraceRequest] = []
    for at in sorted(x for x in times if x < duration):
        prompt = round(rng.lognormvariate(math.log(PROMPT_MEDIAN), PROMPT_SIGMA))
        output = round(rng.lognormvariate(math.log(OUTPUT_MEDIAN), OUTPUT_SIGMA))
        requests.append(
            TraceRequest(at, min(PROMPT_MAX, max(16, prompt)), min(OUTPUT_MAX, max(1, output)))
        )
    return Trace("onoff", tuple(requests), duration)


def shrinking_trace(seed: int = 0) -> Trace:
    """Bursts that shrink: 30 minutes of bursts at 12-20 req/s, then 30 at 2-6 req/s. A
    floor sized for the first half must follow the bursts down."""
    big = onoff_trace(seed, 1800.0, (12.0, 20.0))
    small = onoff_trace(seed, 1800.0, (2.0, 6.0))
    later = (TraceRequest(r.at + 1800.0, r.prompt, r.output) for r in small.requests)
    return Trace("shrinking", (*big.requests, *later), 3600.0)


SPIKE_SECONDS, SPIKE_RATES, SPIKE_SHARE = 10.0, (25.0, 35.0), 1 / 3
QUIET_BURST_RATES = (4.0, 8.0)


def spiky_trace(seed: int = 0, duration: float = 3600.0) -> Trace:
    """On-off bursts whose minutes one replica serves (4-8 req/s), a third of them carrying
    a 10-second spike of 25-35 req/s (clusters as in the bursts): the spike's long prompts
    queue for prefill, and the short outputs decoding beside them get steps that carry a
    full chunk, so TPOT breaks on one replica while the minute's rate stays under its
    capacity. The calibration trace for bursts that break the SLO without asking the
    feed-forward for another replica (autoscale/bursts.py)."""
    base = onoff_trace(seed, duration, QUIET_BURST_RATES)
    rng = random.Random(f"spiky:{seed}")
    times: list[float] = []
    at = rng.uniform(30.0, 120.0)
    while at < duration:
        if rng.random() < SPIKE_SHARE:
            rate, t = rng.uniform(*SPIKE_RATES), at
            while t < at + SPIKE_SECONDS:
                t += rng.expovariate(rate / CLUSTER_MEAN)
                first = t
                while True:
                    times.append(first)
                    if rng.random() <= 1.0 / CLUSTER_MEAN:
                        break
                    first += rng.expovariate(1.0 / CLUSTER_GAP_S)
        at += rng.uniform(90.0, 360.0)
    extra = []
    for t in sorted(x for x in times if x < duration):
        prompt = round(rng.lognormvariate(math.log(PROMPT_MEDIAN), PROMPT_SIGMA))
        output = round(rng.lognormvariate(math.log(OUTPUT_MEDIAN), OUTPUT_SIGMA))
        extra.append(
            TraceRequest(t, min(PROMPT_MAX, max(16, prompt)), min(OUTPUT_MAX, max(1, output)))
        )
    merged = sorted((*base.requests, *extra), key=lambda r: r.at)
    return Trace("spiky", tuple(merged), duration)
