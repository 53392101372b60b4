"""A standing floor for recurring bursts shorter than a cold start. PURE.

A replica ordered for a burst that lasts less than a cold start is ready after the burst is
over; it is then held through the scale-down window, released, and the next burst finds the
fleet small again: the policy pays for replicas that never serve the load they were ordered
for, and the bursts still queue. A fixed fleet sized for the bursts absorbs each one in its
queues for less.

The rule: a *rise* is load at least twice the quietest of the span (scale-down window +
cold start: how long a chased replica is paid for) for which the feed-forward would order
more replicas than for that quiet load (at least one replica: the policy never runs fewer,
so bursts out of idle gaps count); it is a *burst* when it is over within a cold start
plus the signals' window (which stretches every rise by its length), i.e. when a replica
ordered for it would be ready after it. A scale-up whose first replica is ready when the
fleet that ordered it holds the load again, and the load has at least halved since, was
late, and counts as a burst too (back-to-back bursts merge into one long rise in windowed
signals). Two bursts within one span of each other make them recurring: the policy stops
chasing them and keeps a standing floor sized from what the bursts showed, not from the
capacity learnt in the troughs between them: the fewest replicas that absorbed one without
breaking the SLO (proven enough), at least one more than any that one broke (proven too
few); only without either, the bursts' demand at the learnt per-replica capacity. Bursts
the floor absorbs keep it standing, up to two spans apart; two spans without one and it
lapses, and the ordinary scale-down takes the fleet back. Constants come from the spec
(scale-down window, targetUtilization, the policy's scale-up rate) or from what was
observed (the cold start, timed from scale-ups to their first ready replica; the bursts'
load).
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

RECURRING = 2
"""Bursts within one span of each other that make them recurring: one is an accident."""
MEMORY = 16
"""Bursts remembered at most (a pattern of bursts every minute lasts 16 minutes)."""
RISE = 2.0
"""A burst at least doubles the load (the policy's scale-up rate, x2 per decision): the
counting noise of a steady or slowly moving load at many replicas crosses a replica's worth
of load often, but never doubles it. At a fraction of a request per second it does, so a
rise, and the fall that ends it, must also stand out of that noise (_beyond_noise)."""


Burst = tuple[float, float, int, bool]
"""(ended at, highest demand, fewest replicas ready during it or 0, SLO held throughout)."""

Break = tuple[float, float, int, float]
"""A rise that broke the SLO: (requests counted when it ended, its misses, fewest replicas
ready during it, highest demand)."""


@dataclass(frozen=True)
class BurstMemory:
    """What the rule remembers between decisions (carried in History)."""

    ordered: tuple[float, int, float] | None = None
    """(at, replicas ready then, highest demand since) of the scale-up awaiting its first
    ready replica: the cold start, and whether the replica came late."""
    cold_start: float | None = None
    """The last observed delay from a scale-up to its first replica ready."""
    loads: tuple[tuple[float, float], ...] = ()
    """(at, demand req/s) over the span: the quiet load a burst rises from."""
    rising: tuple[float, float, int, bool] | None = None
    """(since, highest demand, fewest replicas ready, SLO met throughout) of the rise above
    the quiet load now under way."""
    bursts: tuple[Burst, ...] = ()
    """The rises that were over within a cold start, of the pattern under way (_chain)."""
    served: float = 0.0
    """Requests counted so far (demand x the time between decisions): the error budget's base."""
    last_at: float | None = None
    """When the memory was last updated."""
    rise_misses: float = 0.0
    """The misses of the rise under way (missed share x demand x the time between decisions)."""
    breaks: tuple[Break, ...] = ()
    """The last two rises that broke the SLO (_budget_floor)."""


@dataclass(frozen=True)
class Floor:
    replicas: int
    peak: float  # the bursts' demand it is sized for (req/s)
    seen: int  # bursts remembered
    span: float  # seconds remembered: twice (scale-down window + cold start)
    budget_note: str = ""  # set by _budget_floor: the misses and the budget that made it

    def reason(self) -> str:
        if self.budget_note:
            return f"standing floor {self.replicas} for {self.budget_note}"
        return (
            f"standing floor {self.replicas} for recurring bursts shorter than a cold start "
            f"({self.seen} in the last {self.span:.0f}s, up to {self.peak:.3g} req/s)"
        )


def cold_start(memory: BurstMemory, default: float) -> float:
    return memory.cold_start if memory.cold_start is not None else default


def young(memory: BurstMemory, now: float, default_cold_start: float, lag: float) -> bool:
    """Whether the rise under way may still be a burst: not yet older than a cold start plus
    the signals' window (observe counts it as one if it ends by then). While bursts recur,
    a replica ordered for such a rise is ready after it, however high it climbs; only once
    it has outlasted that is it a change of level, which replicas ordered now do serve."""
    rising = memory.rising
    return rising is not None and now - rising[0] <= cold_start(memory, default_cold_start) + lag


def _chain(bursts: tuple[Burst, ...], now: float, span: float) -> tuple[Burst, ...]:
    """The bursts of the pattern under way: each within two spans of the next, the newest
    within two spans of now (a burst the floor absorbs may not fall back to the quiet load
    before the next one, so one span without a counted burst is not yet the end of it)."""
    kept: list[Burst] = []
    for burst in reversed(bursts):
        if (kept[-1][0] if kept else now) - burst[0] > 2 * span or len(kept) == MEMORY:
            break
        kept.append(burst)
    return tuple(reversed(kept))


def _budget_floor(memory: BurstMemory, budget: float, span: float) -> Floor | None:
    """Rises that break the SLO recur *for the SLO* when the later one's misses exceed the
    error budget of the requests since the earlier one: the fleet they broke misses the SLO
    over that stretch, however far apart they are in time. The fleet that broke them is
    then proven too few: the floor is one replica more, and it stands while the last one's
    misses would still exceed the budget of the requests since (after that, on the fleet it
    broke, the SLO would hold over the stretch even if the rise came back)."""
    if budget <= 0 or len(memory.breaks) < RECURRING:
        return None
    (before, _, n0, peak0), (after, missed, n1, peak1) = memory.breaks[-2:]
    if missed <= budget * (after - before) or memory.served - after >= missed / budget:
        return None
    note = (
        f"bursts that broke the SLO on {max(n0, n1)} replica(s) recurring within the error "
        f"budget ({missed:.0f} misses in the last, {budget * (after - before):.1f} allowed "
        f"for the {after - before:.0f} requests since the one before, up to "
        f"{max(peak0, peak1):.3g} req/s)"
    )
    return Floor(max(n0, n1) + 1, max(peak0, peak1), RECURRING, 2 * span, note)


def floor(
    memory: BurstMemory, capacity: float, now: float, span: float, budget: float = 0.0
) -> Floor | None:
    """The standing floor, or None while bursts do not recur (or capacity is unknown).
    Recurring: two bursts within one span of each other in the pattern under way (_chain),
    sized for the bursts of its last two spans; or two rises that broke the SLO, the later
    one's misses beyond the error budget `budget` (1 - the attainment target) of the
    requests between them (_budget_floor). The larger floor stands."""
    by_budget = _budget_floor(memory, budget, span)
    by_span = _span_floor(memory, capacity, now, span)
    if by_budget is None or (by_span is not None and by_span.replicas >= by_budget.replicas):
        return by_span
    return by_budget


def _span_floor(memory: BurstMemory, capacity: float, now: float, span: float) -> Floor | None:
    chain = _chain(memory.bursts, now, span)
    times = [b[0] for b in chain]
    if capacity <= 0 or not times:
        return None
    pairs = sum(1 for a, b in itertools.pairwise(times) if b - a <= span)
    if pairs + 1 < RECURRING:
        return None
    recent = [b for b in chain if b[0] > times[-1] - 2 * span]
    peak = max(b[1] for b in recent)
    # Sized from what the bursts showed, not from the capacity learnt in the troughs: the
    # fewest replicas that absorbed one within the SLO are proven enough, and a burst that
    # broke the SLO on n ready replicas proves n too few. Only without either does the
    # windowed demand at the learnt capacity size it (it understates a burst shorter than
    # the window).
    held = [b[2] for b in recent if b[2] > 0 and b[3]]
    broke = [b[2] for b in recent if b[2] > 0 and not b[3]]
    replicas = min(held) if held else math.ceil(peak / capacity - 1e-9)
    replicas = max(replicas, max(broke, default=0) + 1)
    return Floor(replicas, peak, len(times), times[-1] - times[0] + 2 * span)


def observe(
    memory: BurstMemory,
    *,
    now: float,
    ready: int,
    demand: float,
    per_replica: float,
    slo_met: bool,
    scaled_up: bool,
    span: float,
    lag: float,
    default_cold_start: float,
    missed: float = 0.0,
    noise_z: float = 2.0,
) -> BurstMemory:
    """Update the memory after a decision. A rise is load at least RISE x the quietest of
    the span for which the feed-forward (at `per_replica`: capacity x targetUtilization)
    orders more replicas than for that quiet load; it is a burst when it is over within a
    cold start plus `lag`. A scale-up is followed to its first ready replica (the cold
    start); it was late, which counts as a burst too, when the fleet that ordered it holds
    the load by then and the load has at least halved since the order. A rise is also load
    at least RISE x the quietest for which the SLO broke (`slo_met` False; `missed`: the
    window's missed share): a breach an extra replica fixes, whether or not the
    feed-forward asks for one. Starting a rise and ending it both take a change beyond
    `noise_z` standard deviations of the readings' counting noise."""
    ordered, cold = memory.ordered, memory.cold_start
    # Requests and misses between decisions (a window's share x its rate, integrated over
    # time, counts each request once).
    dt = min(now - memory.last_at, lag) if memory.last_at is not None else 0.0
    served = memory.served + demand * max(dt, 0.0)
    rise_misses, breaks = memory.rise_misses, memory.breaks
    bursts = _chain(memory.bursts, now, span)
    if ordered is not None:
        at, ready_then, peak = ordered
        peak = max(peak, demand)
        if ready > ready_then:
            cold, ordered = now - at, None
            counted = any(b[0] >= at for b in bursts)  # the rise it was ordered for ended
            if demand <= ready_then * per_replica and RISE * demand <= peak and not counted:
                # Late: the fleet that ordered it holds the load again. Back-to-back bursts
                # merge into one long rise in the windowed signals; this still sees them.
                # The replica it ordered was not needed for the load now: it proves the
                # pattern, not a size (its demand is sized by the short rises).
                bursts += ((now, 0.0, 0, False),)
        elif now - at > span:
            ordered = None  # never became ready (bounds, failures): forget it
        else:
            ordered = (at, ready_then, peak)
    if ordered is None and scaled_up:
        ordered = (now, ready, demand)
    loads = (*(p for p in memory.loads if p[0] > now - span), (now, demand))
    rising = memory.rising
    if per_replica > 0:
        low = min(d for _, d in loads)
        # The policy never runs fewer than one replica: load that one replica serves is no
        # rise, whether the quiet load is a trickle or nothing at all.
        quiet = max(1, math.ceil(low / per_replica - 1e-9))
        doubled = demand >= RISE * low and _beyond_noise(demand, low, lag, noise_z)
        # A breach counts as a rise only at load that doubled: a breach at the quiet load is
        # not a burst's.
        above = math.ceil(demand / per_replica - 1e-9) > quiet or (doubled and not slo_met)
        # It takes doubling to start a rise, but only the quiet load's replicas to end it: a
        # saturated fleet's demand swings, and one long overload must not read as bursts.
        if above and (rising is not None or doubled):
            if rising is None:
                rising, rise_misses = (now, demand, ready, slo_met), 0.0
            else:
                since, peak, fewest, met = rising
                rising = (since, max(peak, demand), min(fewest, ready), met and slo_met)
            rise_misses += missed * demand * max(dt, 0.0)
        elif rising is not None and not _beyond_noise(rising[1], demand, lag, noise_z):
            pass  # a dip within the counting noise of the rise's peak does not end it
        elif rising is not None:
            since, peak, fewest, met = rising
            short = now - since <= (cold if cold is not None else default_cold_start) + lag
            if short and not any(b[0] >= since for b in bursts):  # one event, counted once
                bursts += ((now, peak, fewest, met and slo_met),)
            if not (met and slo_met) and fewest > 0:
                breaks = (*breaks[-(RECURRING - 1) :], (served, rise_misses, fewest, peak))
            rising, rise_misses = None, 0.0
    return BurstMemory(ordered, cold, loads, rising, bursts, served, now, rise_misses, breaks)


def _beyond_noise(high: float, low: float, window: float, z: float) -> bool:
    """Whether two readings of a rate over `window` seconds differ beyond z standard
    deviations of their counting noise (Poisson counts / window: the variance of their
    difference is (high + low) / window under a steady rate). At many replicas a doubling
    always is; at a few tenths of a request per second a minute's count doubles by chance."""
    return high - low > z * math.sqrt(max(high + low, 0.0) / window)
