"""LLMService status: conditions with honest transition times, phase, and the status document.

Pure functions. A condition's lastTransitionTime changes only when its status flips, so
`kubectl wait --for=condition=Ready` and dashboards see real transitions, not reconcile ticks.
"""

from __future__ import annotations

import datetime
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, get_args

from tokenfleet.api.status import ConditionType

CONDITION_TYPES: tuple[str, ...] = get_args(ConditionType)
# Keys the reconciler writes that must disappear when a reconcile no longer produces them
# (a spec turned invalid has no plan and serves no endpoint). replicas / readyReplicas /
# selector stay as last seen: the workload keeps running and the scale subresource reads them.
RECONCILER_REMOVABLE = frozenset({"endpoint", "plan", "gpu"})


@dataclass(frozen=True)
class Condition:
    type: str
    status: bool | None  # None -> "Unknown"
    reason: str
    message: str = ""


@dataclass(frozen=True)
class Observed:
    """What one reconcile learned; the status document is derived from it."""

    generation: int
    degraded: Condition | None = None  # set -> nothing was applied this time
    planned: Condition | None = None
    plan_summary: Mapping[str, Any] | None = None
    replicas: int | None = None
    ready_replicas: int | None = None
    selector: str | None = None
    endpoint: str | None = None
    autoscaling: Condition | None = None  # None: leave the autoscaler's condition as it is
    routing: Condition | None = None  # spec.routing (controller.routing)
    gpu_fallback: Condition | None = None  # spec.gpu.type auto (controller.gpu_placement)
    extra: Mapping[str, Any] = field(default_factory=dict)
    # (warning, reason, message) to post once the status is written
    events: tuple[tuple[bool, str, str], ...] = ()


def now_iso() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _status_word(value: bool | None) -> str:
    return "Unknown" if value is None else ("True" if value else "False")


def merge_conditions(
    previous: Sequence[Mapping[str, Any]],
    updates: Iterable[Condition],
    *,
    generation: int,
    now: str,
) -> list[dict[str, Any]]:
    """Apply updates onto previous conditions; keep the transition time if status is unchanged."""
    by_type: dict[str, dict[str, Any]] = {str(c.get("type")): dict(c) for c in previous}
    for cond in updates:
        word = _status_word(cond.status)
        old = by_type.get(cond.type)
        changed = old is None or old.get("status") != word
        by_type[cond.type] = {
            "type": cond.type,
            "status": word,
            "reason": cond.reason,
            "message": cond.message,
            "observedGeneration": generation,
            "lastTransitionTime": now if changed or old is None else old.get("lastTransitionTime"),
        }
    order = {name: i for i, name in enumerate(CONDITION_TYPES)}
    return sorted(by_type.values(), key=lambda c: (order.get(c["type"], 99), c["type"]))


def conditions_for(observed: Observed) -> list[Condition]:
    if observed.degraded is not None:
        updates = [
            Condition("Degraded", True, observed.degraded.reason, observed.degraded.message),
            Condition("Ready", False, observed.degraded.reason, "see the Degraded condition"),
            Condition("Progressing", False, observed.degraded.reason, "see the Degraded condition"),
        ]
        if observed.planned is not None:
            updates.append(observed.planned)
        return updates
    replicas = observed.replicas or 0
    ready = observed.ready_replicas or 0
    is_ready = replicas > 0 and ready >= replicas
    updates = [Condition("Degraded", False, "Reconciled", "all manifests applied")]
    if observed.autoscaling is not None:
        updates.append(observed.autoscaling)
    if observed.routing is not None:
        updates.append(observed.routing)
    if observed.gpu_fallback is not None:
        updates.append(observed.gpu_fallback)
    if observed.planned is not None:
        updates.append(observed.planned)
    if is_ready:
        updates.append(Condition("Ready", True, "ReplicasReady", f"{ready}/{replicas} ready"))
        updates.append(Condition("Progressing", False, "RolloutComplete", "all replicas ready"))
    elif replicas == 0:
        updates.append(Condition("Ready", False, "ScaledToZero", "replicas is 0"))
        updates.append(Condition("Progressing", False, "ScaledToZero", "replicas is 0"))
    else:
        message = f"{ready}/{replicas} replicas ready"
        updates.append(Condition("Ready", False, "ReplicasNotReady", message))
        updates.append(Condition("Progressing", True, "RollingOut", message))
    return updates


def phase_of(conditions: Sequence[Mapping[str, Any]]) -> str:
    state = {c["type"]: c["status"] for c in conditions}
    if state.get("Degraded") == "True":
        return "Degraded"
    if state.get("Ready") == "True":
        return "Ready"
    if state.get("Progressing") == "True":
        return "Progressing"
    return "Pending"


def build_status(
    previous: Mapping[str, Any], observed: Observed, *, now: str | None = None
) -> dict[str, Any]:
    """The full status document for this reconcile (to be merge-patched onto the object)."""
    now = now or now_iso()
    conditions = merge_conditions(
        previous.get("conditions") or [],
        conditions_for(observed),
        generation=observed.generation,
        now=now,
    )
    status: dict[str, Any] = {
        "observedGeneration": observed.generation,
        "phase": phase_of(conditions),
        "conditions": conditions,
    }
    if observed.degraded is None:
        status["replicas"] = observed.replicas or 0
        status["readyReplicas"] = observed.ready_replicas or 0
        if observed.selector is not None:
            status["selector"] = observed.selector
        if observed.endpoint is not None:
            status["endpoint"] = observed.endpoint
    if observed.plan_summary is not None:
        status["plan"] = dict(observed.plan_summary)
    status.update(observed.extra)
    return status


def transitions(
    previous: Sequence[Mapping[str, Any]], current: Sequence[Mapping[str, Any]]
) -> list[dict[str, Any]]:
    """Conditions whose status flipped (or appeared): these deserve a Kubernetes Event."""
    old = {c.get("type"): c.get("status") for c in previous}
    return [dict(c) for c in current if old.get(c["type"]) != c["status"]]


def is_noop(previous: Mapping[str, Any], new: Mapping[str, Any]) -> bool:
    """True when writing `new` would change nothing (skip the PATCH: less apiserver load)."""
    return all(previous.get(key) == value for key, value in new.items())


def replace_keys(
    status: Mapping[str, Any], owned: Iterable[str], produced: Mapping[str, Any]
) -> dict[str, Any]:
    """`status` with a writer's `owned` keys replaced by `produced`: an owned key the writer
    no longer produces is dropped; every other writer's key is kept as it is."""
    drop = frozenset(owned)
    result = {key: value for key, value in status.items() if key not in drop}
    result.update(produced)
    return result


def reconciler_status(
    previous: Mapping[str, Any], observed: Observed, *, now: str | None = None
) -> dict[str, Any]:
    """The whole status after a reconcile, composed onto the CURRENT status `previous`:
    the autoscaler's condition and keys are kept as they are there, the reconciler's own
    are replaced, and its endpoint / plan are dropped when they no longer hold.

    The reconciler seeds Autoscaling (Disabled, or AwaitingMetrics before any decision)
    but never overwrites a condition the autoscaler has since reported."""
    auto = observed.autoscaling
    if auto is not None and auto.reason == "AwaitingMetrics":
        current = next(
            (c for c in previous.get("conditions") or [] if c.get("type") == "Autoscaling"), None
        )
        if current is not None and current.get("reason") != "Disabled":
            observed = replace(observed, autoscaling=None)
    produced = build_status(previous, observed, now=now)
    return replace_keys(previous, RECONCILER_REMOVABLE, produced)
