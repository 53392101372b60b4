"""The feed-forward at the prefix-cache hit rate the engines observe.

plan() prices prefill by `workload.prefixCacheHitRate` (capacity/prefix.py). When the
LLMService leaves it unset (0), the autoscaler's predicted capacity per replica comes from
the reconciler's kept plan (controller/plans.py) evaluated at the hit rate the engines
report instead (signals.prefix_hit_rate_query: vLLM's prefix_cache_hits /
prefix_cache_queries over the window, SGLang's cache_hit_rate), with the layout pinned to
the one running. A configured hit rate is the user's word and wins.

The observed rate is rounded to HIT_RATE_STEP before planning, so noise does not re-plan
every tick; results are kept per LLMService and plan generation, bounded like Ceilings.
"""

from __future__ import annotations

import asyncio

from tokenfleet.capacity.pinned import replan
from tokenfleet.capacity.types import Plan
from tokenfleet.controller.plans import KeptPlan
from tokenfleet.errors import UserError

HIT_RATE_STEP = 0.05  # re-plan once the observed rate moves a step
MAX_HIT_RATE = 0.95  # api/workload.py: prefixCacheHitRate le=0.95
MAX_CACHED = 4096


def fed_hit_rate(configured: float, observed: float | None) -> float | None:
    """The hit rate to plan at, or None: keep the plan of the spec (a configured rate,
    no observation, or one that rounds to 0)."""
    if configured > 0 or observed is None or observed <= 0:
        return None
    stepped = min(round(observed / HIT_RATE_STEP) * HIT_RATE_STEP, MAX_HIT_RATE)
    return round(stepped, 4) if stepped > 0 else None


class PrefixFeed:
    """Planned goodput per replica at an observed hit rate, per (namespace, name)."""

    def __init__(self) -> None:
        self._plans: dict[tuple[str, str], tuple[tuple[str, int, float], float | None]] = {}

    def forget(self, key: tuple[str, str]) -> None:
        self._plans.pop(key, None)

    async def predicted(
        self, key: tuple[str, str], kept: KeptPlan, hit_rate: float
    ) -> float | None:
        version = (kept.uid, kept.generation, hit_rate)
        cached = self._plans.get(key)
        if cached is not None and cached[0] == version:
            return cached[1]
        if len(self._plans) >= MAX_CACHED:
            self._plans.pop(next(iter(self._plans)))
        # plan() runs the scheduler in virtual time: off the event loop.
        goodput = await asyncio.to_thread(_plan_at, kept.plan, hit_rate)
        self._plans[key] = (version, goodput)
        return goodput


def _plan_at(p: Plan, hit_rate: float) -> float | None:
    """The kept plan's goodput per replica at `hit_rate`, its layout pinned."""
    if p.request is None:
        return None
    try:
        goodput = float(
            replan(p, prefix_cache_hit_rate=hit_rate).predicted.goodput_requests_per_second
        )
    except UserError:  # the planner refuses this workload: the spec's plan stands
        return None
    return goodput if goodput > 0 else None
