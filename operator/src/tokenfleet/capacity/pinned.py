"""A request re-planned on the layout an earlier plan chose.

Callers that ask the planner again at other lengths, rates or hit rates (the observed-mix
feed-forward, the prefix feed, autoscale-sim) must not let it pick another TP/PP or context
length: the fleet they model runs the one already planned.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from tokenfleet.capacity.errors import PlanError
from tokenfleet.capacity.types import Plan, PlanRequest


def pin_layout(request: PlanRequest, p: Plan, **changes: Any) -> PlanRequest:
    """`request` fixed to `p`'s tensor/pipeline parallelism and max-model-len, plus `changes`."""
    return replace(
        request,
        tensor_parallel_size=p.tensor_parallel_size,
        pipeline_parallel_size=p.pipeline_parallel_size,
        pipeline_auto=False,
        max_model_len=p.max_model_len,
        **changes,
    )


def replan(p: Plan, **changes: Any) -> Plan:
    """`p` asked again at another workload (`changes`: lengths, hit rate), on its own
    layout: what the fleet `p` sized serves then. Raises PlanError as plan() does."""
    from tokenfleet.capacity import plan

    if p.request is None:
        raise PlanError("plan", p.model, "carries no request to replan", "plan it with plan()")
    return plan(pin_layout(p.request, p, **changes))
