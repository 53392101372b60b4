"""The operator's side of the SLO ceiling: the plan's step model, the observed prompt mix.

The autoscaler's tick hands each observation here; the step model of the LLMService's plan
is built once per spec generation (plan() is pure and fast, but not free) and the Ceiling
(autoscale/attainability.py) estimated from the prompt-length histogram Prometheus holds.
No histogram, no plan (a model config only in a ConfigMap), or no data: None, and the policy
reads the SLO signals as before. Also: the status block and the condition a person reads.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from tokenfleet.autoscale.attainability import Ceiling, ceiling
from tokenfleet.autoscale.signals import Observation
from tokenfleet.controller import status as st
from tokenfleet.scheduling.core import StepTimer

CONDITION = "SLOAttainable"
MAX_CACHED = 4096  # step models kept (one per LLMService): bounded whatever tenants create


@dataclass(frozen=True)
class _Shape:
    timer: StepTimer
    max_batched_tokens: int
    max_model_len: int


class Ceilings:
    """Step models per LLMService, keyed by (namespace, name) and the spec's generation."""

    def __init__(self) -> None:
        self._shapes: dict[tuple[str, str], tuple[tuple[str, int], _Shape | None]] = {}

    async def _shape(
        self, key: tuple[str, str], version: tuple[str, int], service: Any
    ) -> _Shape | None:
        cached = self._shapes.get(key)
        if cached is not None and cached[0] == version:
            return cached[1]
        if len(self._shapes) >= MAX_CACHED:  # deleted services: forget the oldest entry
            self._shapes.pop(next(iter(self._shapes)))
        # plan() runs the scheduler in virtual time: off the event loop, once per generation.
        shape = await asyncio.to_thread(_plan_shape, service)
        self._shapes[key] = (version, shape)
        return shape

    async def estimate(
        self,
        key: tuple[str, str],
        body: Mapping[str, Any],
        service: Any,
        observation: Observation | None,
    ) -> Ceiling | None:
        if observation is None or observation.prompts is None:
            return None
        if observation.prompts.total <= 0:
            return None
        meta = body.get("metadata") or {}
        version = (str(meta.get("uid") or ""), int(meta.get("generation") or 0))
        shape = await self._shape(key, version, service)
        if shape is None:
            return None
        slo = service.spec.slo
        return ceiling(
            shape.timer,
            shape.max_batched_tokens,
            replace(observation.prompts, top=float(shape.max_model_len)),
            ttft_ms=slo.ttft_ms,
            slo_attainment=slo.attainment,
            quantile=slo.quantile,
        )


def _plan_shape(service: Any) -> _Shape | None:
    try:
        from tokenfleet.api import plan_service, to_plan_request
        from tokenfleet.capacity import step_model

        p = plan_service(to_plan_request(service))
        return _Shape(step_model(p), p.max_num_batched_tokens, p.max_model_len)
    except Exception:  # the reconciler reports plan errors; no ceiling here
        return None


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
