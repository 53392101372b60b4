"""The feed-forward at the prefix-cache hit rate the engines observe.

plan() prices prefill by `workload.prefixCacheHitRate` (capacity/prefix.py). When the
LLMService leaves it unset (0), the autoscaler's predicted capacity per replica comes from
a plan at the hit rate the engines report instead (signals.prefix_hit_rate_query: vLLM's
prefix_cache_hits / prefix_cache_queries over the window, SGLang's cache_hit_rate), with
the layout pinned to the one running. A configured hit rate is the user's word and wins.

The observed rate is rounded to HIT_RATE_STEP before planning, so noise does not re-plan
every tick; plans are kept per LLMService and spec generation, bounded like Ceilings.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

from tokenfleet.capacity.pinned import pin_layout

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
        self, key: tuple[str, str], body: Mapping[str, Any], service: Any, hit_rate: float
    ) -> float | None:
        meta = body.get("metadata") or {}
        version = (str(meta.get("uid") or ""), int(meta.get("generation") or 0), hit_rate)
        cached = self._plans.get(key)
        if cached is not None and cached[0] == version:
            return cached[1]
        if len(self._plans) >= MAX_CACHED:
            self._plans.pop(next(iter(self._plans)))
        # plan() runs the scheduler in virtual time: off the event loop.
        goodput = await asyncio.to_thread(_plan_at, service, hit_rate)
        self._plans[key] = (version, goodput)
        return goodput


def _plan_at(service: Any, hit_rate: float) -> float | None:
    try:
        from tokenfleet.api import plan_service, to_plan_request
        from tokenfleet.capacity import plan

        p = plan_service(to_plan_request(service))
        if p.request is None:
            return None
        pinned = pin_layout(p.request, p, prefix_cache_hit_rate=hit_rate)
        goodput = float(plan(pinned).predicted.goodput_requests_per_second)
    except Exception:  # the reconciler reports plan errors; the spec's plan stands
        return None
    return goodput if goodput > 0 else None
