"""The operator's side of the SLO ceiling: the plan's step model, the observed prompt mix.

The autoscaler's tick hands each observation here with the reconciler's kept plan of the
LLMService (controller/plans.py: planned once per generation, with the model config the
reconciler resolved); its step model is built once per plan and the Ceiling
(autoscale/attainability.py) estimated from the prompt-length histogram Prometheus holds.
No histogram or no data: None, and the policy reads the SLO signals as before. The mix's
capacity is that plan at the observed lengths, its layout pinned. Also: the status block
and the condition a person reads.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, replace
from typing import Any

from tokenfleet.api.workload import SloSpec
from tokenfleet.autoscale.attainability import Ceiling, ceiling
from tokenfleet.autoscale.mix import attainable_mean_prompt, drifted, mix_capacity
from tokenfleet.autoscale.signals import MIX_WINDOW_SECONDS, Observation
from tokenfleet.capacity.pinned import replan
from tokenfleet.capacity.types import Plan
from tokenfleet.controller import status as st
from tokenfleet.controller.plans import KeptPlan
from tokenfleet.errors import UserError
from tokenfleet.scheduling.core import StepTimer

CONDITION = "SLOAttainable"
MAX_CACHED = 4096  # step models kept (one per LLMService): bounded whatever tenants create


@dataclass(frozen=True)
class _Shape:
    timer: StepTimer
    max_batched_tokens: int
    max_model_len: int
    plan: Plan  # the kept plan: its request, layout pinned, is evaluated per length class


@dataclass(frozen=True)
class _Mix:
    version: tuple[str, int]
    longest: int
    lengths: tuple[float, float]  # (attainable mean prompt, mean output) planned at
    capacity: float | None


class Ceilings:
    """Step models per LLMService, keyed by (namespace, name) and the spec's generation."""

    def __init__(self) -> None:
        self._shapes: dict[tuple[str, str], tuple[tuple[str, int], _Shape]] = {}
        self._mixes: dict[tuple[str, str], _Mix] = {}
        self._mix_since: dict[tuple[str, str], float] = {}

    def forget(self, key: tuple[str, str]) -> None:
        """The LLMService is gone (or its loop stopped): nothing of it is kept."""
        self._shapes.pop(key, None)
        self._mixes.pop(key, None)
        self._mix_since.pop(key, None)

    async def _shape(self, key: tuple[str, str], kept: KeptPlan) -> _Shape:
        version = (kept.uid, kept.generation)
        cached = self._shapes.get(key)
        if cached is not None and cached[0] == version:
            return cached[1]
        if len(self._shapes) >= MAX_CACHED:  # deleted services: forget the oldest entry
            self._shapes.pop(next(iter(self._shapes)))
        # The step model of the plan: built off the event loop, once per generation.
        shape = await asyncio.to_thread(_plan_shape, kept.plan)
        self._shapes[key] = (version, shape)
        return shape

    async def mix_capacity(
        self,
        key: tuple[str, str],
        kept: KeptPlan,
        observation: Observation | None,
        ceiling: Ceiling | None = None,
    ) -> float | None:
        """plan()'s goodput per replica at the observed attainable mix (autoscale/mix.py):
        the policy's feed-forward. Re-planned only when the spec changes, the ceiling's
        longest attainable prompt moves, or a mean length drifts (mix.MIX_DRIFT)."""
        prompts = observation.prompts if observation is not None else None
        output = observation.mean_output_tokens if observation is not None else None
        mean_prompt = observation.mean_prompt_tokens if observation is not None else None
        if prompts is None or output is None or prompts.total <= 0 or output <= 0:
            cached = self._mixes.get(key)
            return cached.capacity if cached is not None else None
        if key not in self._mix_since and observation is not None:
            if len(self._mix_since) >= MAX_CACHED:
                self._mix_since.pop(next(iter(self._mix_since)))
            self._mix_since[key] = observation.signals.at
        version = (kept.uid, kept.generation)
        shape = await self._shape(key, kept)
        bounded = replace(prompts, top=float(shape.max_model_len))
        longest = ceiling.longest_prompt if ceiling is not None else shape.max_model_len
        mean = attainable_mean_prompt(bounded, mean_prompt, longest)
        lengths = (mean, output)
        cached = self._mixes.get(key)
        if (
            cached is not None
            and cached.version == version
            and cached.longest == longest
            and not drifted(cached.lengths, lengths)
        ):
            return cached.capacity
        capacity = await asyncio.to_thread(_plan_mix, shape, bounded, mean_prompt, output, longest)
        if len(self._mixes) >= MAX_CACHED:
            self._mixes.pop(next(iter(self._mixes)))
        self._mixes[key] = _Mix(version, longest, lengths, capacity)
        return capacity

    def mix_settled(self, key: tuple[str, str], now: float) -> bool:
        """Whether the mix has been seen for a whole MIX_WINDOW_SECONDS: before, the window
        holds the short outputs (they finish first) and not yet the long ones, and the
        mix's capacity reads high (fleet simulator, bursty: 17%). Only then is it fed
        forward; the status shows it from the first observation."""
        since = self._mix_since.get(key)
        return since is not None and now - since >= MIX_WINDOW_SECONDS

    async def estimate(
        self,
        key: tuple[str, str],
        kept: KeptPlan,
        slo: SloSpec,
        observation: Observation | None,
    ) -> Ceiling | None:
        if observation is None or observation.prompts is None:
            return None
        if observation.prompts.total <= 0:
            return None
        shape = await self._shape(key, kept)
        return ceiling(
            shape.timer,
            shape.max_batched_tokens,
            replace(observation.prompts, top=float(shape.max_model_len)),
            ttft_ms=slo.ttft_ms,
            slo_attainment=slo.attainment,
            quantile=slo.quantile,
        )


def _plan_shape(plan: Plan) -> _Shape:
    from tokenfleet.capacity import step_model

    return _Shape(step_model(plan), plan.max_num_batched_tokens, plan.max_model_len, plan)


def _plan_mix(
    shape: _Shape, prompts: Any, mean_prompt: float | None, output: float, longest: int
) -> float | None:
    p = shape.plan
    if p.request is None:
        return None

    def goodput(prompt_tokens: int, output_tokens: int) -> float:
        if prompt_tokens + output_tokens > p.max_model_len:
            return 0.0
        try:
            at = replan(p, input_tokens=prompt_tokens, output_tokens=output_tokens)
        except UserError:  # a class the planner refuses is a class it cannot serve
            return 0.0
        return float(at.predicted.goodput_requests_per_second)

    mix = mix_capacity(prompts, mean_prompt, output, longest, goodput)
    return None if mix is None else mix.requests_per_second


def attainability_status(c: Ceiling | None) -> dict[str, Any] | None:
    """status.autoscaling.attainability (camelCase)."""
    if c is None:
        return None
    from tokenfleet.api.status import AttainabilityStatus

    return AttainabilityStatus(
        attainable=round(c.attainable, 4),
        target=round(c.target, 4),
        longest_prompt_tokens=c.longest_prompt,
        queue_wait_budget_seconds=None
        if c.wait_budget_seconds is None
        else round(c.wait_budget_seconds, 4),
        message=c.message(),
    ).to_dict()


def attainability_condition(c: Ceiling) -> st.Condition:
    """True while slo.attainment is reachable on the observed traffic; False, with the
    share of requests no replica can serve in time and the resulting ceiling, when not."""
    if c.limited:
        return st.Condition(CONDITION, False, "TrafficLimited", c.message())
    return st.Condition(CONDITION, True, "Reachable", c.message())
