"""Did this machine keep the demo's time scale? Pure: readings in, words out.

The local fleet runs K times faster than the wall clock. A simulated engine that cannot
keep up (a busy machine: every replica, the operator, Prometheus and the load share its
cores) does not charge its lag to the requests; it rebases its virtual clock, and counts the
virtual seconds it lost (`tokenfleet sim`'s /sim/clock). Its latencies stay the capacity
model's, but it serves fewer requests per wall second than a replica at K x would, while
the load generator still sends K x the simulated rate: queues grow that a real replica would
not build, and the SLO breaks for reasons that are the machine's. The load generator can
fall behind too (it then catches up in bursts). The demo reports both instead of an outage.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

BEHIND_LIMIT = 0.05
"""A sample in which some engine's clock ran more than 5% slow counts as not keeping the
time scale: 5% less service per wall second shifts a replica at the autoscaler's 80% target
utilisation to 84%, the edge of what its headroom is for."""


@dataclass(frozen=True)
class ClockReading:
    wall: float  # the harness's monotonic clock when read, seconds
    lost: float  # the engine's virtual seconds lost so far (SimEngine.lost_seconds)


def behind(before: ClockReading, after: ClockReading, time_scale: float) -> float:
    """The share of the time scale an engine lost between two readings (0: it kept it)."""
    wall = after.wall - before.wall
    if wall <= 0 or time_scale <= 0:
        return 0.0
    return max(0.0, min(1.0, (after.lost - before.lost) / (wall * time_scale)))


@dataclass(frozen=True)
class Sample:
    t: float  # simulated seconds
    behind: float | None  # the slowest engine's share lost since the last sample
    late: int  # arrivals the load generator sent more than load.LATE_S late since then


def slow(sample: Sample) -> bool:
    return (sample.behind or 0.0) > BEHIND_LIMIT or sample.late > 0


def row_note(sample: Sample, time_scale: float) -> str:
    """A view line's note when the machine fell behind in its interval, else ''."""
    parts = []
    if (sample.behind or 0.0) > BEHIND_LIMIT:
        parts.append(f"engines at {(1 - (sample.behind or 0.0)) * 100:.0f}% of {time_scale:g}x")
    if sample.late > 0:
        parts.append(f"{sample.late} request(s) sent late")
    return f"[machine behind: {', '.join(parts)}] " if parts else ""


def verdict(samples: Sequence[Sample], time_scale: float, worst_late_s: float) -> str:
    """The summary's line on the time scale."""
    behind_ones = [s for s in samples if slow(s)]
    if not behind_ones:
        return (
            f"time scale: kept at {time_scale:g}x (every engine within {BEHIND_LIMIT:.0%}, "
            f"the load at most {worst_late_s:.1f} simulated s behind its schedule)"
        )
    worst = max((s.behind or 0.0) for s in samples)
    late = sum(s.late for s in samples)
    return (
        f"time scale: NOT kept in {len(behind_ones)} of {len(samples)} samples (from "
        f"{behind_ones[0].t / 60:.1f} simulated min; engines down to "
        f"{(1 - worst) * 100:.0f}% of {time_scale:g}x, {late} request(s) sent late, up to "
        f"{worst_late_s:.1f} simulated s): this machine was too busy, so replicas served "
        "less per simulated second than their model and queues grew that a real fleet "
        "would not build; the attainment above understates the autoscaler. Run again on "
        "a quieter machine, or with a smaller --time-scale (e.g. 5)"
    )
