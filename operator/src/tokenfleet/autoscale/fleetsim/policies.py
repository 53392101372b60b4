"""The autoscalers `tokenfleet autoscale-sim` compares: ours (the operator's own
`policy.decide`), the HPA law the peers run on (their configurations: peers.py), a static
peak provision and the oracle. Each sees what its real counterpart would see, every
`period`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from tokenfleet.api.spec import LLMServiceSpec
from tokenfleet.autoscale import policy
from tokenfleet.autoscale.attainability import Ceiling
from tokenfleet.autoscale.types import CapacityEstimate, Decision, FleetState, History, Signals

# The Kubernetes HPA v2 defaults (reference/autoscaling.md) shared by the KEDA and HPA rules.
HPA_SYNC_S = 15.0  # --horizontal-pod-autoscaler-sync-period
HPA_TOLERANCE = 0.1  # --horizontal-pod-autoscaler-tolerance
HPA_DOWN_WINDOW_S = 300.0  # behavior.scaleDown.stabilizationWindowSeconds
HPA_UP_PODS = 4  # behavior.scaleUp: max(4 pods, 100%) per 15 s


@dataclass(frozen=True)
class FleetView:
    now: float
    current: FleetState
    signals: Signals
    ceiling: Ceiling | None = None  # what the observed mix lets the SLO reach
    mix_capacity: float | None = None  # plan() at the observed attainable mix (mix.py)


class Autoscaler(Protocol):
    name: str
    period: float

    def initial(self) -> int: ...

    def decide(self, view: FleetView) -> int: ...


@dataclass
class Tokenfleet:
    """Ours: every decision is `tokenfleet.autoscale.policy.decide`, History carried over."""

    spec: LLMServiceSpec
    predicted_capacity: float
    start: int
    name: str = "tokenfleet"
    period: float = 15.0
    history: History = field(init=False)
    decisions: list[Decision] = field(default_factory=list)
    ceilings: list[Ceiling | None] = field(default_factory=list)
    capacity_error: float = 1.0  # --capacity-error: the model's error, on the mix's plan too

    def __post_init__(self) -> None:
        self.history = History(capacity=CapacityEstimate(predicted=self.predicted_capacity))

    def initial(self) -> int:
        return self.start

    def decide(self, view: FleetView) -> int:
        mix = view.mix_capacity * self.capacity_error if view.mix_capacity else None
        d = policy.decide(
            self.spec,
            view.current,
            view.signals,
            self.history,
            view.now,
            ceiling=view.ceiling,
            mix_capacity=mix,
        )
        self.ceilings.append(view.ceiling)
        self.history = d.history
        self.decisions.append(d)
        return d.desired


@dataclass
class HpaRule:
    """The HPA v2 law on per-replica metrics (each a (read, target) pair): per metric,
    desired = ceil(value x ready pods / target), nothing within the 10% tolerance; the
    largest recommendation wins. Up at most max(`up_min_pods`, 100%) per sync (the HPA's
    default behavior: 4 pods; 0 for a behavior of Percent 100 alone), down to the highest
    recommendation of the last 300 s. The metrics are re-read every `poll` seconds (KEDA's
    polling interval; the HPA's own metrics pipeline reads every sync). The peers' rules
    are in peers.py."""

    name: str
    metrics: tuple[tuple[Callable[[Signals], float | None], float], ...]
    poll: float
    start: int
    lo: int
    hi: int
    up_min_pods: int = HPA_UP_PODS
    period: float = HPA_SYNC_S
    _values: tuple[float | None, ...] = ()
    _polled_at: float = -math.inf
    _recs: list[tuple[float, int]] = field(default_factory=list)

    def initial(self) -> int:
        return self.start

    def decide(self, view: FleetView) -> int:
        if view.now - self._polled_at >= self.poll - 1e-9:
            self._values = tuple(read(view.signals) for read, _ in self.metrics)
            self._polled_at = view.now
        desired, ready = view.current.desired, view.current.ready
        recs = []
        for value, (_, target) in zip(self._values, self.metrics, strict=True):
            if value is None:
                continue
            if abs(value / target - 1) > HPA_TOLERANCE:
                recs.append(math.ceil(value * ready / target - 1e-9))
            else:
                recs.append(desired)
        rec = max(recs) if recs else desired
        rec = min(max(rec, self.lo), self.hi)
        self._recs = [(t, n) for t, n in self._recs if t > view.now - HPA_DOWN_WINDOW_S]
        self._recs.append((view.now, rec))
        if rec > desired:
            return min(rec, desired + max(self.up_min_pods, desired))
        if rec < desired:
            return min(desired, max(n for _, n in self._recs))
        return desired


@dataclass
class Static:
    """Provision for the peak minute, all the time."""

    replicas: int
    name: str = "static"
    period: float = 15.0

    def initial(self) -> int:
        return self.replicas

    def decide(self, view: FleetView) -> int:
        return self.replicas


@dataclass
class Oracle:
    """Perfect foresight: at every decision, enough replicas for the busiest minute from now
    until replicas started now would be ready (plus one period), at the replica's measured
    capacity. Starts replicas a cold start ahead and drops them as soon as load falls: the
    lower bound on GPU-hours for a fleet with that cold start."""

    need: Sequence[int]  # replicas per bucket
    bucket: float
    cold_start: float
    name: str = "oracle"
    period: float = 15.0

    def _at(self, start: float, end: float) -> int:
        first = int(start // self.bucket)
        last = min(int(end // self.bucket), len(self.need) - 1)
        return max(self.need[min(first, len(self.need) - 1) : last + 1])

    def initial(self) -> int:
        return self._at(0.0, self.cold_start + self.period)

    def decide(self, view: FleetView) -> int:
        return self._at(view.now, view.now + self.cold_start + self.period)


@dataclass
class Reactive(Oracle):
    """The ideal reactive policy: it knows each minute's load the instant that minute
    starts (no measurement lag, no rate window, no up window) but nothing after it, and
    runs at the measured capacity with no headroom. Replicas still take the cold start.
    No causal policy without standing headroom reacts sooner, so its attainment bounds
    what reacting can reach on a step (`spike`)."""

    name: str = "reactive"

    def initial(self) -> int:
        return self._at(0.0, 0.0)

    def decide(self, view: FleetView) -> int:
        return self._at(view.now, view.now)


@dataclass
class Hold(Oracle):
    """The ideal reactive policy that holds, as a scaler with a scale-down window must: it
    knows each minute's load the instant that minute starts, at the measured capacity with
    no headroom, and keeps the highest need of the last `hold` seconds (ours: the spec's
    scaleDownStabilizationSeconds). On bursts shorter than a cold start it shows what
    reacting and holding can reach with perfect measurement: where it misses the SLO or
    costs more than a fixed fleet, a causal scaler with that window does no better by
    measuring better."""

    hold: float = 180.0
    name: str = "hold"

    def initial(self) -> int:
        return self._at(0.0, 0.0)

    def decide(self, view: FleetView) -> int:
        return self._at(max(0.0, view.now - self.hold), view.now)


def needed_replicas(rates: Sequence[float], capacity: float, lo: int = 1) -> list[int]:
    return [max(lo, math.ceil(rate / capacity - 1e-9)) for rate in rates]
