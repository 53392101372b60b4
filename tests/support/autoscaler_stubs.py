"""Stand-ins the autoscaler's integration tests inject at the policy / signals boundary:
a signals source the test sets (or takes down) and a policy whose target the test moves."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field, replace
from typing import Any

from tests.support.cluster_objects import example, llms
from tokenfleet.autoscale.prometheus import PrometheusUnreachable
from tokenfleet.autoscale.signals import Attainment, Boundary, Observation, SignalsQuery
from tokenfleet.autoscale.types import Decision, FleetState, History, Signals
from tokenfleet.testing.kmock_cluster import Cluster

NAME = "llama-3-1-8b"  # the LLMService of examples/llama-3.1-8b-l4.yaml
URL = "http://prometheus.test:9090"  # never dialled: the source is injected


@dataclass
class Source:
    """Signals as a test sets them; raises PrometheusUnreachable while `down`."""

    current: Signals | None = None
    load: dict[str, float] = field(default_factory=dict)
    down: bool = False
    queries: list[tuple[SignalsQuery, str]] = field(default_factory=list)

    async def signals(self, query: SignalsQuery, url: str, at: float) -> Observation:
        self.queries.append((query, url))
        if self.down:
            raise PrometheusUnreachable("connection refused (test)")
        nothing = Attainment(None, Boundary(None, None, "nodata"), None)
        sig = (
            replace(self.current, at=at)
            if self.current
            else Signals(at=at, reporting_replicas=1, request_rate=2.0)
        )
        return Observation(sig, nothing, nothing)

    async def pod_load(self, query: SignalsQuery, url: str, at: float) -> dict[str, float]:
        return dict(self.load)


@dataclass
class StubPolicy:
    """decide() with a target the test moves; holds PrometheusDown without signals."""

    target: int | None = None
    calls: list[tuple[FleetState, Signals | None]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    learnt: float | None = None  # set: the returned history claims this observed capacity
    histories: list[History] = field(default_factory=list)  # what each call was given

    def __call__(
        self, spec: Any, current: FleetState, signals: Signals | None, history: History, now: float
    ) -> Decision:
        with self.lock:
            self.calls.append((current, signals))
            self.histories.append(history)
        if self.learnt is not None and history.capacity is not None:
            history = replace(history, capacity=replace(history.capacity, observed=self.learnt))
        if signals is None:
            return Decision(current.desired, current.desired, "no signals", "hold", history,
                            held="PrometheusDown")  # fmt: skip
        want = current.desired if self.target is None else self.target
        desired = min(max(want, current.min_replicas), current.max_replicas)
        limited = "max" if want > current.max_replicas else None
        return Decision(current.desired, desired, f"target {want}", "ttft", history,
                        limited=limited)  # fmt: skip


def autoscaled(interval: int = 5, **auto: Any) -> dict[str, Any]:
    body = example("llama-3.1-8b-l4.yaml")
    body["spec"]["autoscaling"].update({"intervalSeconds": interval, **auto})
    return body


def status(cluster: Cluster) -> dict[str, Any]:
    return dict(llms(cluster, NAME).get("status") or {})
