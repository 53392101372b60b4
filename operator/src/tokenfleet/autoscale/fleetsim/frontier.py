"""The static frontier: what a fixed fleet of N replicas reaches on the trace, N = 1, 2, ...

Each point is a full replay with a Static(N) fleet (warm from the start), so a user sees
what each point of attainment costs and where the traffic, not the fleet, stops the SLO.
The walk stops at maxReplicas, or once the attainment has stopped rising: PLATEAU_STEPS
more replicas in a row each added less than PLATEAU_GAIN (a replay per N; a default
maxReplicas can be in the hundreds).
"""

from __future__ import annotations

from dataclasses import dataclass

from tokenfleet.autoscale.fleetsim.policies import Static
from tokenfleet.autoscale.fleetsim.run import RunResult, Setup, run_policy

PLATEAU_GAIN = 0.0005  # 0.05 points of attainment
PLATEAU_STEPS = 2


@dataclass(frozen=True)
class FrontierPoint:
    replicas: int
    attainment: float
    gpu_hours: float


def frontier(setup: Setup) -> tuple[FrontierPoint, ...]:
    points: list[FrontierPoint] = []
    flat = 0
    for n in range(max(1, setup.options.min_replicas), setup.max_replicas + 1):
        r: RunResult = run_policy(setup, Static(n))
        point = FrontierPoint(n, r.attainment, r.gpu_hours)
        if points and point.attainment - points[-1].attainment < PLATEAU_GAIN:
            flat += 1
        else:
            flat = 0
        points.append(point)
        if flat >= PLATEAU_STEPS and point.attainment >= setup.target - 0.003:
            break
    return tuple(points)


def cheapest_meeting(points: tuple[FrontierPoint, ...], attainment: float) -> FrontierPoint | None:
    return next((p for p in points if p.attainment >= attainment - 1e-12), None)


def cheapest_reaching(points: tuple[FrontierPoint, ...], attainment: float) -> FrontierPoint | None:
    """The smallest fixed fleet at or above `attainment` (None: none reaches it)."""
    return cheapest_meeting(points, attainment)
