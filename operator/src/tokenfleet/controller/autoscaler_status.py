"""The autoscaler's part of an LLMService's status, beside the reconciler's (status.py).

status.autoscaling (the decision, its signals, the capacity learnt, the SLO's ceiling),
latestTtftMs and the Autoscaling / SLOAttainable conditions, composed onto the CURRENT
object by the shared status writer (statuswrite.py), so the reconciler's part is never
reverted. PURE: no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tokenfleet.autoscale.attainability import Ceiling
from tokenfleet.autoscale.history import iso, parse_iso
from tokenfleet.autoscale.signals import Observation
from tokenfleet.autoscale.types import Decision
from tokenfleet.controller import status as st
from tokenfleet.controller.attainability import attainability_condition, attainability_status

# Holds that mean "the data cannot be trusted": the condition turns False (Held). The other
# holds (ReplicasStarting, Cooldown, Stabilizing) are the policy working as meant: Active.
DATA_HOLDS = frozenset({"PrometheusDown", "NoData", "StaleData", "PartialData"})
AUTOSCALER_KEYS = frozenset({"autoscaling", "latestTtftMs"})


def autoscaling_condition(decision: Decision) -> st.Condition:
    if decision.held in DATA_HOLDS:
        message = decision.reason
        if not message.startswith(str(decision.held)):
            message = f"{decision.held}: {message}"
        return st.Condition("Autoscaling", False, "Held", message)
    if decision.limited == "max":
        return st.Condition("Autoscaling", True, "LimitedAtMax", decision.reason)
    return st.Condition("Autoscaling", True, "Active", decision.reason)


def autoscaling_status(
    decision: Decision,
    observation: Observation | None,
    *,
    now: float,
    last_scale_at: float | None,
) -> dict[str, Any]:
    """status.autoscaling (camelCase, absent values left out)."""
    from tokenfleet.api import AutoscalingStatus, CapacityStatus
    from tokenfleet.api import Signals as SignalsStatus

    signals = observation.signals if observation is not None else None
    capacity = decision.history.capacity
    record = AutoscalingStatus(
        desired_replicas=decision.desired,
        last_decision_time=iso(now),
        last_scale_time=iso(last_scale_at) if last_scale_at is not None else None,
        reason=decision.reason[:1000],
        driver=decision.driver,
        held=decision.held,
        signals=None
        if signals is None
        else SignalsStatus(
            ttft_seconds=_round(signals.ttft_quantile_seconds),
            ttft_attainment=_round(signals.ttft_attainment),
            tpot_attainment=_round(signals.tpot_attainment),
            goodput=_round(signals.goodput),
            request_rate=_round(signals.request_rate),
            running_per_replica=_round(signals.running_per_replica),
            waiting_per_replica=_round(signals.waiting_per_replica),
            kv_usage=_round(signals.kv_usage),
            reporting_replicas=signals.reporting_replicas,
            picker_queued=_round(signals.picker_queued),
            queue_wait_seconds=_round(signals.queue_wait_quantile_seconds),
            prefix_cache_hit_rate=_round(signals.prefix_cache_hit_rate),
        ),
        capacity=None
        if capacity is None
        else CapacityStatus(
            predicted=_round(capacity.predicted), observed=_round(capacity.observed)
        ),
        cold_start_seconds=_round(decision.history.cold_start_seconds),
    )
    return record.to_dict()


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 4)


def compose_autoscaler_status(
    obj: Mapping[str, Any],
    decision: Decision,
    observation: Observation | None,
    *,
    now: float,
    scaled: bool,
    ceiling: Ceiling | None = None,
    mix_capacity: float | None = None,
    roles: list[dict[str, Any]] | None = None,
) -> dict[str, Any] | None:
    """The whole new status composed onto the CURRENT object: the autoscaler's condition and
    keys replaced, the reconciler's kept. None (write nothing) once the object is being
    deleted or autoscaling was turned off meanwhile: the reconciler then says Disabled."""
    meta = obj.get("metadata") or {}
    enabled = ((obj.get("spec") or {}).get("autoscaling") or {}).get("enabled", False)
    if meta.get("deletionTimestamp") or not enabled:
        return None
    previous = dict(obj.get("status") or {})
    before = previous.get("autoscaling") or {}
    last_scale = now if scaled else parse_iso(before.get("lastScaleTime"))
    record = autoscaling_status(decision, observation, now=now, last_scale_at=last_scale)
    attainability = attainability_status(ceiling)
    if attainability is not None:
        record["attainability"] = attainability
    if mix_capacity is not None and "capacity" in record:
        record["capacity"]["predictedAtMix"] = round(mix_capacity, 4)
    if roles:
        record["roles"] = roles
    produced: dict[str, Any] = {
        "autoscaling": record,
        "conditions": st.merge_conditions(
            previous.get("conditions") or [],
            [autoscaling_condition(decision)]
            + ([attainability_condition(ceiling)] if ceiling is not None else []),
            generation=int(meta.get("generation") or 0),
            now=iso(now),
        ),
    }
    signals = observation.signals if observation is not None else None
    if signals is not None and signals.ttft_quantile_seconds is not None:
        produced["latestTtftMs"] = round(signals.ttft_quantile_seconds * 1000, 1)
    return st.replace_keys(previous, AUTOSCALER_KEYS, produced)


def compose_awaiting(obj: Mapping[str, Any], message: str, *, now: float) -> dict[str, Any] | None:
    """Autoscaling=Unknown AwaitingMetrics with why, onto the current object (no decision)."""
    meta = obj.get("metadata") or {}
    enabled = ((obj.get("spec") or {}).get("autoscaling") or {}).get("enabled", False)
    if meta.get("deletionTimestamp") or not enabled:
        return None
    previous = dict(obj.get("status") or {})
    conditions = st.merge_conditions(
        previous.get("conditions") or [],
        [st.Condition("Autoscaling", None, "AwaitingMetrics", message)],
        generation=int(meta.get("generation") or 0),
        now=iso(now),
    )
    return {**previous, "conditions": conditions}
