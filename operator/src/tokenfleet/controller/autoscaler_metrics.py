"""The autoscaler's series on the operator's /metrics (controller/metrics.py declares them):
set per decision, removed with the LLMService, so a deleted one leaves no series."""

from __future__ import annotations

import contextlib
from typing import Any, get_args

from tokenfleet.autoscale.types import Decision, FleetState, HoldReason
from tokenfleet.controller.metrics import Metrics

HOLD_REASONS: tuple[str, ...] = get_args(HoldReason)


def record(m: Metrics, namespace: str, name: str, decision: Decision, current: FleetState) -> None:
    m.autoscaler_desired.labels(namespace, name).set(decision.desired)
    m.autoscaler_ready.labels(namespace, name).set(current.ready)
    m.autoscaler_decisions.labels(namespace, name, decision.direction, decision.driver).inc()
    for reason in HOLD_REASONS:
        m.autoscaler_held.labels(namespace, name, reason).set(1 if decision.held == reason else 0)
    m.autoscaler_at_max.labels(namespace, name).set(1 if decision.limited == "max" else 0)
    capacity = decision.history.capacity
    if capacity is not None:
        m.autoscaler_capacity.labels(namespace, name, "predicted").set(capacity.predicted)
        if capacity.observed is not None:
            m.autoscaler_capacity.labels(namespace, name, "observed").set(capacity.observed)


def forget(m: Metrics, namespace: str, name: str) -> None:
    series: list[tuple[Any, tuple[str, ...]]] = [
        (m.autoscaler_desired, ()),
        (m.autoscaler_ready, ()),
        (m.autoscaler_at_max, ()),
        *((m.autoscaler_held, (reason,)) for reason in HOLD_REASONS),
        *((m.autoscaler_capacity, (source,)) for source in ("predicted", "observed")),
    ]
    for family in m.autoscaler_decisions.collect():
        for sample in family.samples:
            labels = sample.labels
            if labels.get("namespace") == namespace and labels.get("llmservice") == name:
                series.append((m.autoscaler_decisions, (labels["direction"], labels["driver"])))
    for metric, extra in series:
        with contextlib.suppress(KeyError):  # never recorded for this LLMService
            metric.remove(namespace, name, *extra)
