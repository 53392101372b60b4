"""`tokenfleet operator --time-scale K`: autoscale a simulated fleet that runs K times faster
than the wall clock (`tokenfleet sim --time-scale K`, as `tokenfleet demo` and the closed-loop
system test run it). 1 (the default) is production and changes nothing.

A time-scaled simulator reports latency histograms in simulated seconds, but Prometheus
stamps samples and computes rate() on the wall clock. So the autoscaler runs on simulated
seconds throughout, and this module converts at the one border, Prometheus:
- the policy's clock is `SimulatedClock` (K simulated seconds per wall second), so every
  window in the spec and in PolicyParams (60 s up, 180 s down, 60 s staleness) is simulated;
- the loop sleeps intervalSeconds / K wall seconds (Autoscalers reads options.time_scale);
- `ScaledSource` evaluates the queries at the matching wall time over window / K wall
  seconds, divides measured rates (requests/s, goodput) by K and multiplies sample ages by K.
Latencies, attainment, queue lengths and KV usage are the same in both clocks.
Status times (lastDecisionTime, lastScaleTime) are on the simulated clock.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable

from tokenfleet.autoscale.signals import Observation, SignalsQuery
from tokenfleet.controller.prometheus_source import SignalSource


class SimulatedClock:
    """Unix-like seconds that start at the wall clock's now and run `scale` times faster."""

    def __init__(self, scale: float, wall: Callable[[], float] = time.time) -> None:
        if not scale > 0:
            raise ValueError(f"--time-scale {scale}: must be > 0 (1 = real time)")
        self.scale = scale
        self._wall = wall
        self.origin = wall()

    def __call__(self) -> float:
        return self.origin + (self._wall() - self.origin) * self.scale

    def to_wall(self, simulated: float) -> float:
        return self.origin + (simulated - self.origin) / self.scale


def _div(value: float | None, by: float) -> float | None:
    return None if value is None else value / by


class ScaledSource:
    """A SignalSource (controller/prometheus_source.py) over another, in simulated seconds."""

    def __init__(self, inner: SignalSource, clock: SimulatedClock) -> None:
        self.inner = inner
        self.clock = clock

    def _wall_query(self, query: SignalsQuery) -> SignalsQuery:
        return dataclasses.replace(query, window_seconds=query.window_seconds / self.clock.scale)

    async def signals(self, query: SignalsQuery, url: str, at: float) -> Observation:
        k = self.clock.scale
        observed = await self.inner.signals(self._wall_query(query), url, self.clock.to_wall(at))
        s = observed.signals
        age = s.newest_sample_age_seconds
        signals = dataclasses.replace(
            s,
            at=at,
            request_rate=_div(s.request_rate, k),
            goodput=_div(s.goodput, k),
            newest_sample_age_seconds=None if age is None else age * k,
        )
        return dataclasses.replace(
            observed, signals=signals, goodput_upper=_div(observed.goodput_upper, k)
        )

    async def pod_load(self, query: SignalsQuery, url: str, at: float) -> dict[str, float]:
        return await self.inner.pod_load(self._wall_query(query), url, self.clock.to_wall(at))

    async def release(self, namespace: str, name: str) -> None:
        release = getattr(self.inner, "release", None)
        if release is not None:
            await release(namespace, name)

    async def close(self) -> None:
        close = getattr(self.inner, "close", None)
        if close is not None:
            await close()
