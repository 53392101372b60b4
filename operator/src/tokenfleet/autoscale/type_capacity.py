"""The capacity of a fleet that spans GPU types (spec.gpu.type auto after a fallback). Pure.

The policy (autoscale/policy.py) counts replicas of one capacity each. A fleet with 2 H100
replicas at 20 req/s and 1 L40S replica at 3 req/s serves 43 req/s, not 3 x 20: the policy
is given the capacity-weighted mean per replica (`per_replica`), so replicas x mean is the
fleet's real capacity, and its answer in replicas is turned back into replicas of the types
that will actually change (`replicas_for`): added ones go to the type growth goes to (the
fallback's), removed ones come off the least preferred type first (the fallback's fill).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class TypeCapacity:
    gpu: str
    replicas: int
    goodput: float  # requests/s one replica of this type serves within the SLO


def from_status(status: Mapping[str, Any]) -> tuple[list[TypeCapacity], str | None] | None:
    """(types in the planner's order with their replicas and goodput, the growth type) from
    status.gpu; None unless the fleet spans more than one type."""
    gpu = status.get("gpu") or {}
    goodput = {
        str(c.get("type")): float(c.get("goodputPerReplica") or 0.0)
        for c in gpu.get("candidates") or []
    }
    types = [
        TypeCapacity(
            str(row.get("type")),
            int(row.get("replicas") or 0),
            goodput.get(str(row.get("type")), 0.0),
        )
        for row in gpu.get("placement") or []
    ]
    if sum(1 for t in types if t.replicas > 0) < 2 or any(
        t.goodput <= 0 for t in types if t.replicas > 0
    ):
        return None
    return types, gpu.get("growth")


def per_replica(types: Sequence[TypeCapacity]) -> float:
    """The fleet's capacity per replica: replicas x this is what the fleet serves."""
    replicas = sum(t.replicas for t in types)
    return sum(t.replicas * t.goodput for t in types) / replicas


def replicas_for(
    decided: int,
    current: int,
    types: Sequence[TypeCapacity],
    growth: str | None,
    bounds: tuple[int, int],
) -> int:
    """The replicas that change the fleet's capacity by what the policy's `decided` meant
    (it counted `per_replica` each), within `bounds` (min, max replicas)."""
    mean = per_replica(types)
    low, high = bounds
    if decided > current:
        grow = next((t.goodput for t in types if t.gpu == growth), mean)
        added = math.ceil((decided - current) * mean / grow - 1e-9)
        return max(low, min(high, current + added))
    if decided < current:
        # Removal: the least preferred type's replicas go first (the fallback's fill order);
        # remove no more capacity than the policy released.
        release = (current - decided) * mean
        removed = 0
        for t in reversed(types):
            for _ in range(t.replicas):
                if t.goodput > release + 1e-9:
                    return max(low, min(high, current - removed))
                release -= t.goodput
                removed += 1
        return max(low, min(high, current - removed))
    return decided
