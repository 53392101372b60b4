"""A generated hostile trace (seeded): 5% of requests have prompts whose prefill alone breaks
the TTFT SLO on an idle Llama-3.1-8B on L40S, the rest a steady Poisson load. Shared by the
test that no replica count is scaled for them and the benchmark of capLongPrefills."""

from __future__ import annotations

import math
import random

from tokenfleet.autoscale.fleetsim.run import RunResult
from tokenfleet.autoscale.fleetsim.traces import Trace, TraceRequest

DURATION = 900.0
RATE = 8.0
LONG_SHARE = 0.05
LONG_PROMPT = 7000  # under max-model-len 8192, over what L40S prefills in 500 ms


def hostile_trace(with_long: bool) -> Trace:
    """The hostile trace (`with_long`) or the benign one: the same steady load without the
    long prompts."""
    rng = random.Random(15)
    requests: list[TraceRequest] = []
    t = 0.0
    while True:
        t += rng.expovariate(RATE)
        if t >= DURATION:
            break
        if rng.random() < LONG_SHARE:
            if with_long:
                requests.append(TraceRequest(t, LONG_PROMPT, 2))
            continue
        prompt = min(3000, max(16, round(rng.lognormvariate(math.log(800), 0.6))))
        output = min(400, max(2, round(rng.lognormvariate(math.log(100), 0.6))))
        requests.append(TraceRequest(t, prompt, output))
    return Trace("hostile" if with_long else "benign", tuple(requests), DURATION)


def settled_mean(result: RunResult) -> float:
    """The mean desired replicas once the policy has settled (after the first 5 minutes)."""
    settled = [p.desired for p in result.timeline if p.at >= 300.0]
    return sum(settled) / len(settled)
