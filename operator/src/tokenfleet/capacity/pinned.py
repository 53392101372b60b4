"""A request re-planned on the layout an earlier plan chose.

Callers that ask the planner again at other lengths, rates or hit rates (the observed-mix
feed-forward, the prefix feed, autoscale-sim) must not let it pick another TP/PP or context
length: the fleet they model runs the one already planned.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

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
