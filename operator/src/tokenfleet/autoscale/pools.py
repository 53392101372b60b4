"""Disaggregated serving's two pools: how many prefill replicas, given the decode pool. Pure.

The decode pool is spec.replicas and the regular policy (policy.py) decides it on the decode
pods' own signals: their TPOT attainment, KV usage and queue, fed forward by the decode
role's goodput. This module decides the prefill pool:
- feed-forward: the request rate over one prefill replica's goodput (the plan's);
- the fixable part of TTFT: the prefill pods' queue wait at slo.quantile against the wait the
  prefill role's TTFT share leaves above a lone prefill (`queueWaitBudgetMs` of the plan):
  above it, one more replica than the feed-forward asks for at least; far below it (under
  half) and above the feed-forward, one fewer;
- the ratio band: prefill replicas per decode replica stay inside the planner's band (the
  ratio at prompts half and twice as long as planned), so neither pool starves the other;
- zero together: no decode replica, no prefill replica (and the first decode replica brings
  the first prefill replica).
Missing data holds the pool where it is.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

SCALE_DOWN_SHARE = 0.5  # queue wait below this share of its budget allows one step down


@dataclass(frozen=True)
class PrefillInputs:
    current: int  # prefill replicas now
    decode: int  # decode replicas the decode decision wants
    request_rate: float | None  # requests/s over the window (None: no data)
    queue_wait_seconds: float | None  # prefill pods' queue wait at slo.quantile
    goodput_per_replica: float  # the plan's prefill goodput
    queue_wait_budget_seconds: float
    band: tuple[float, float]  # prefill per decode (low, high); (0, 0): none


@dataclass(frozen=True)
class PoolDecision:
    replicas: int
    reason: str


def _bounds(i: PrefillInputs) -> tuple[int, int]:
    low, high = i.band
    if i.decode <= 0:
        return 0, 0
    if high <= 0:
        return 1, 10**6
    return max(1, math.ceil(low * i.decode - 1e-9)), max(1, math.ceil(high * i.decode - 1e-9))


def prefill_replicas(i: PrefillInputs) -> PoolDecision:
    low, high = _bounds(i)
    if i.decode <= 0:
        return PoolDecision(0, "no decode replica: the prefill pool scales to zero with it")
    if i.request_rate is None or i.goodput_per_replica <= 0:
        want, why = max(i.current, low), "no request rate: held"
    else:
        need = max(1, math.ceil(i.request_rate / i.goodput_per_replica - 1e-9))
        want = need
        why = (
            f"{i.request_rate:.2f} req/s over {i.goodput_per_replica:.2f} per replica needs {need}"
        )
        wait, budget = i.queue_wait_seconds, i.queue_wait_budget_seconds
        if wait is not None and wait > budget:
            want = max(need, i.current + 1)
            why += f"; queue wait {wait * 1e3:.0f} ms above its {budget * 1e3:.0f} ms: one more"
        elif wait is not None and i.current > need and wait < SCALE_DOWN_SHARE * budget:
            want = i.current - 1
            why += f"; queue wait {wait * 1e3:.0f} ms, well inside its budget: one fewer"
        elif i.current > need:
            want = i.current
            why += "; the queue wait does not show room: held"
    clamped = min(max(want, low), high)
    if clamped != want:
        side = "low" if clamped > want else "high"
        why += (
            f"; kept at {clamped} by the ratio band's {side} end "
            f"({i.band[0 if side == 'low' else 1]:.2f} per decode replica x {i.decode})"
        )
    return PoolDecision(clamped, why)
