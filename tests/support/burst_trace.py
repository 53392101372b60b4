"""A generated trace of bursts shorter than a cold start (seeded): Poisson arrivals at several
times the mean load for 10-60 s, then idle gaps of 1-3 minutes with a trickle of requests.
The calibration trace of autoscale/bursts.py (its constants come from the spec; this trace,
not the Azure traces, is what its behaviour was checked on)."""

from __future__ import annotations

import math
import random

from tokenfleet.autoscale.fleetsim.traces import Trace, TraceRequest


def burst_trace(
    seed: int = 15,
    duration: float = 2400.0,
    burst_rate: float = 12.0,
    idle_rate: float = 0.3,
) -> Trace:
    rng = random.Random(seed)
    requests: list[TraceRequest] = []
    t = 0.0
    bursting = False
    end = rng.uniform(60.0, 180.0)
    while t < duration:
        rate = burst_rate if bursting else idle_rate
        step = rng.expovariate(rate)
        if t + step >= end:
            t = end
            bursting = not bursting
            end = t + (rng.uniform(10.0, 60.0) if bursting else rng.uniform(60.0, 180.0))
            continue
        t += step
        if t >= duration:
            break
        prompt = min(3000, max(16, round(rng.lognormvariate(math.log(600), 0.6))))
        output = min(400, max(2, round(rng.lognormvariate(math.log(100), 0.6))))
        requests.append(TraceRequest(t, prompt, output))
    return Trace("bursts", tuple(requests), duration)
