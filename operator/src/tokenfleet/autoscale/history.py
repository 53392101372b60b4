"""The policy's memory in status: what an operator restart rebuilds `History` from. PURE.

The autoscaler keeps `History` in memory per LLMService; status.autoscaling records enough
of it (capacity.observed, lastScaleTime, the last decision, coldStartSeconds) to resume
after a restart or a change of the active replica. Times are RFC 3339 UTC seconds, as
status writes them.
"""

from __future__ import annotations

import dataclasses
import datetime
from collections.abc import Mapping
from typing import Any

from tokenfleet.autoscale.types import CapacityEstimate, History, Recommendation

TIME_FORMAT = "%Y-%m-%dT%H:%M:%SZ"


def iso(at: float) -> str:
    return datetime.datetime.fromtimestamp(at, datetime.UTC).strftime(TIME_FORMAT)


def parse_iso(text: Any) -> float | None:
    if not isinstance(text, str):
        return None
    try:
        return (
            datetime.datetime.strptime(text, TIME_FORMAT).replace(tzinfo=datetime.UTC).timestamp()
        )
    except ValueError:
        return None


def rebuild_history(autoscaling: Mapping[str, Any], predicted: float) -> History:
    """The policy's memory after an operator restart, from what status.autoscaling recorded.

    Conservative where the record is thin: the last scale time counts as both the last
    scale-up and scale-down (cooldowns apply either way), and the last decision is one
    recommendation, so the scale-down stabilization window starts from it, not from empty.
    """
    capacity = autoscaling.get("capacity") or {}
    observed = capacity.get("observed")
    last_scale = parse_iso(autoscaling.get("lastScaleTime"))
    decided_at = parse_iso(autoscaling.get("lastDecisionTime"))
    desired = autoscaling.get("desiredReplicas")
    recommendations = (
        (Recommendation(decided_at, int(desired)),)
        if decided_at is not None and isinstance(desired, int)
        else ()
    )
    cold = autoscaling.get("coldStartSeconds")
    return History(
        recommendations=recommendations,
        last_scale_up_at=last_scale,
        last_scale_down_at=last_scale,
        capacity=CapacityEstimate(
            predicted=predicted, observed=float(observed) if observed is not None else None
        ),
        cold_start_seconds=float(cold) if isinstance(cold, int | float) else None,
    )


def with_predicted(history: History, predicted: float) -> History:
    """Keep the plan's prediction current (a spec change re-plans) and the learning as is."""
    capacity = history.capacity or CapacityEstimate(predicted=predicted)
    if capacity.predicted == predicted and history.capacity is not None:
        return history
    return dataclasses.replace(history, capacity=dataclasses.replace(capacity, predicted=predicted))
