"""The feed-forward at the speculative acceptance the engines observe.

plan() prices speculative decoding at an acceptance rate: spec.engine.speculativeAcceptance-
Rate, or the method's published prior (capacity/speculative.py PRIORS). Once the engines
run, they count what their proposer really achieves (vLLM's spec_decode accepted-token and
draft counters, SGLang's acceptance-length gauge: signals.acceptance_query); the autoscaler's
predicted capacity per replica then comes from a plan at that rate in place of the prior,
on the layout running: the reconciler's kept plan asked again (controller/plans.py,
capacity/pinned.py). A configured rate is the user's word and wins,
as with the prefix feed (controller/prefix_feed.py).

The observed rate is rounded to RATE_STEP before planning, so noise does not re-plan every
tick; results are kept per LLMService and plan generation, bounded like the prefix feed's.
"""

from __future__ import annotations

import asyncio
from dataclasses import replace
from typing import Any

from tokenfleet.api.spec import LLMServiceSpec
from tokenfleet.capacity.pinned import replan
from tokenfleet.capacity.speculative import rate_for_length
from tokenfleet.capacity.types import Plan
from tokenfleet.controller.plans import KeptPlan
from tokenfleet.errors import UserError

RATE_STEP = 0.05
MAX_CACHED = 4096


def fed_acceptance(configured: float | None, observed_length: float | None, k: int) -> float | None:
    """The acceptance rate to plan at, or None: keep the plan of the spec (a configured
    rate, no speculation running, or nothing observed)."""
    if configured is not None or observed_length is None or k < 1:
        return None
    rate = rate_for_length(observed_length, k)
    return round(round(rate / RATE_STEP) * RATE_STEP, 4)


def speculative_tokens(spec: LLMServiceSpec) -> int:
    """K of the LLMService's speculative settings (0: none, or none the planner reads)."""
    engine = spec.engine
    if not engine.speculative:
        return 0
    from tokenfleet.engines.speculative import read_native

    try:
        return read_native(engine.kind, engine.speculative, "spec.engine.speculative")[1]
    except UserError:
        return 0


class SpecFeed:
    """Planned goodput per replica at an observed acceptance rate, per (namespace, name)."""

    def __init__(self) -> None:
        self._plans: dict[tuple[str, str], tuple[tuple[str, int, float, float], float | None]] = {}

    def forget(self, key: tuple[str, str]) -> None:
        self._plans.pop(key, None)

    async def predicted(
        self, key: tuple[str, str], kept: KeptPlan, rate: float, hit_rate: float | None
    ) -> float | None:
        version = (kept.uid, kept.generation, rate, hit_rate if hit_rate is not None else -1.0)
        cached = self._plans.get(key)
        if cached is not None and cached[0] == version:
            return cached[1]
        if len(self._plans) >= MAX_CACHED:
            self._plans.pop(next(iter(self._plans)))
        # plan() runs the scheduler in virtual time: off the event loop.
        goodput = await asyncio.to_thread(plan_at, kept.plan, rate, hit_rate)
        self._plans[key] = (version, goodput)
        return goodput


def plan_at(p: Plan, rate: float, hit_rate: float | None) -> float | None:
    """Goodput per replica of the kept plan's layout with speculation at `rate` (and the
    observed prefix hit rate, when the prefix feed has one)."""
    request = p.request
    if request is None or request.speculative is None or p.speculative is None:
        return None
    speculative = replace(
        request.speculative, acceptance_rate=rate, acceptance_source="observed",
        policy="always" if p.speculative.enabled else "auto",
    )  # fmt: skip
    changes: dict[str, Any] = {"speculative": speculative}
    if hit_rate is not None:
        changes["prefix_cache_hit_rate"] = hit_rate
    try:
        goodput = float(replan(p, **changes).predicted.goodput_requests_per_second)
    except UserError:  # the planner refuses this workload: the spec's plan stands
        return None
    return goodput if goodput > 0 else None
