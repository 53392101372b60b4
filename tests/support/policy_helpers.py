"""Builders for the policy tests: a spec, a fleet, signals and a first History."""

from __future__ import annotations

from typing import Any

from tokenfleet.api.spec import LLMServiceSpec
from tokenfleet.autoscale.policy import decide
from tokenfleet.autoscale.types import CapacityEstimate, Decision, FleetState, History, Signals

CAPACITY = 10.0  # predicted req/s per replica in every test


def spec(routing: bool = False, **autoscaling: Any) -> LLMServiceSpec:
    """`routing`: the spec routes through the gateway (what minReplicas 0 needs)."""
    scaling = {"enabled": True, "minReplicas": 1, "maxReplicas": 20, **autoscaling}
    body: dict[str, Any] = {
        "model": {"id": "meta-llama/Llama-3.1-8B"},
        "gpu": {"type": "h100-sxm"},
        "autoscaling": scaling,
    }
    if routing:
        body["routing"] = {"enabled": True}
    return LLMServiceSpec.model_validate(body)


def fleet(desired: int, ready: int | None = None, lo: int = 1, hi: int = 20) -> FleetState:
    return FleetState(
        desired=desired, ready=desired if ready is None else ready, min_replicas=lo, max_replicas=hi
    )


def signals(
    at: float,
    reporting: int,
    rate: float | None,
    ttft: float | None = 0.1,
    attainment: float | None = 1.0,
    **more: Any,
) -> Signals:
    return Signals(
        at=at,
        reporting_replicas=reporting,
        request_rate=rate,
        ttft_quantile_seconds=ttft,
        ttft_attainment=attainment,
        tpot_attainment=attainment,
        newest_sample_age_seconds=more.pop("age", 5.0),
        **more,
    )


def first_history(capacity: float = CAPACITY) -> History:
    return History(capacity=CapacityEstimate(predicted=capacity))


def run_sequence(
    the_spec: LLMServiceSpec,
    start: FleetState,
    observations: list[tuple[float, float | None, float | None, float | None]],
    history: History | None = None,
    period: float = 15.0,
) -> list[Decision]:
    """Decide every `period` s; replicas become ready at once (no cold start) and signals
    come from (rate, ttft, attainment) triples. Returns every decision."""
    history = history or first_history()
    current = start
    out: list[Decision] = []
    for index, (rate, ttft, attainment, *_rest) in enumerate(observations):
        now = 1000.0 + index * period
        d = decide(
            the_spec, current, signals(now, current.ready, rate, ttft, attainment), history, now
        )
        out.append(d)
        history = d.history
        current = FleetState(d.desired, d.desired, current.min_replicas, current.max_replicas)
    return out
