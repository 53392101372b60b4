"""spec.gpu.type auto on the cluster: the I/O around the pure fallback decision.

Before a reconcile renders, `observe_cluster` lists the LLMService's engine pods and reads
what the last pass decided (status.gpu); `Decider` is the render's split step: it calls
autoscale.gpu_fallback.decide with the generation's plan (its ranked candidates) and keeps
the Placement; `gpu_status`, `condition` and the Placement's events say what was decided.
The states live in status.gpu.placement, so another operator replica (or a restart) goes on
where this one stopped.
"""

from __future__ import annotations

import datetime
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from tokenfleet.api import LLMService
from tokenfleet.autoscale import gpu_fallback as fb
from tokenfleet.capacity.types import Plan
from tokenfleet.controller import status as st
from tokenfleet.controller.kube import KubeClient
from tokenfleet.render.meta import GPU_TYPE_LABEL, LLMSERVICE_LABEL

CONDITION = "GpuFallback"


def parse_time(text: Any) -> float | None:
    if not isinstance(text, str):
        return None
    try:
        return datetime.datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def iso(at: float) -> str:
    return datetime.datetime.fromtimestamp(at, datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass(frozen=True)
class Seen:
    """The cluster as one pass sees it, for the fallback decision."""

    observed: dict[str, fb.TypeObserved]
    previous: tuple[fb.TypeState, ...]
    previous_growth: str | None
    now: float
    settings: fb.Settings


def _previous(status: Mapping[str, Any]) -> tuple[tuple[fb.TypeState, ...], dict[str, int], Any]:
    gpu = status.get("gpu") or {}
    states, desired = [], {}
    for row in gpu.get("placement") or []:
        gpu_id = str(row.get("type") or "")
        if not gpu_id:
            continue
        desired[gpu_id] = int(row.get("replicas") or 0)
        since = parse_time(row.get("unavailableSince"))
        states.append(
            fb.TypeState(gpu_id, since, int(row.get("held") or 0), str(row.get("reason") or ""))
        )
    return tuple(states), desired, gpu.get("growth")


async def observe_cluster(
    kube: KubeClient, service: LLMService, status: Mapping[str, Any], now: float
) -> Seen | None:
    """None unless spec.gpu.type is auto. One pod list per pass, by the LLMService's label."""
    if service.spec.gpu.type != "auto":
        return None
    selector = f"{LLMSERVICE_LABEL}={service.name}"
    pods = await kube.list("v1", "Pod", service.namespace, selector)
    observed = fb.observe(pods, GPU_TYPE_LABEL, parse_time)
    previous, desired, growth = _previous(status)
    for gpu_id, replicas in desired.items():
        seen = observed.get(gpu_id, fb.TypeObserved())
        observed[gpu_id] = fb.TypeObserved(
            replicas,
            seen.scheduled,
            seen.ready,
            seen.unschedulable_since,
            seen.unschedulable_message,
            seen.pending,
        )
    spec = service.spec.gpu.fallback
    settings = fb.Settings(float(spec.unschedulable_seconds), float(spec.dwell_seconds))
    return Seen(observed, previous, growth, now, settings)


def candidates(plan: Plan) -> list[fb.Candidate]:
    """The plan's usable types in rank order, each capped by its maxCount. Only types whose
    replica is as many nodes as the chosen one's join: the InferencePool and the Service
    select one pod role (a server, or a multi-node replica's leader)."""
    assert plan.choice is not None
    multi = plan.nodes_per_replica > 1
    out = []
    for r in plan.choice.usable:
        p = r.plan
        assert p is not None
        if (p.nodes_per_replica > 1) != multi:
            continue
        cap = None if r.max_count is None else r.max_count // p.gpus_per_replica
        out.append(fb.Candidate(r.gpu.id, cap))
    return out


@dataclass
class Decider:
    """The render's split step (render.desired's `split`): pure given `seen`; keeps what it
    decided for the status, the condition and the Events."""

    seen: Seen
    replicas: int
    placement: fb.Placement | None = field(default=None, init=False)

    def __call__(self, plan: Plan) -> dict[str, int] | None:
        if plan.choice is None:
            return None
        s = self.seen
        placement = fb.decide(candidates(plan), self.replicas, s.observed, s.previous, s.now,
                              s.settings, s.previous_growth)  # fmt: skip
        self.placement = placement
        split = {gpu: n for gpu, n in placement.split.items() if n > 0}
        # Scaled to zero: keep the preferred type's workload, at 0.
        return split or {next(iter(placement.split)): 0}


def condition(placement: fb.Placement) -> st.Condition:
    if placement.fallback is None:
        return st.Condition(CONDITION, False, "OnPreferredType", placement.message)
    reason = "PreferredUnavailable" if placement.fallback == "Unschedulable" else "MaxCountReached"
    return st.Condition(CONDITION, True, reason, placement.message)


def gpu_status(plan: Plan, placement: fb.Placement | None, seen: Seen | None) -> dict[str, Any]:
    """status.gpu: the choice (chosen, runner-up, each candidate's cost) and, with a
    placement, the replicas per type and what the fallback remembers."""
    from tokenfleet.api.status import GpuStatus

    assert plan.choice is not None
    choice = plan.choice
    doc: dict[str, Any] = {
        "chosen": choice.chosen.gpu.id,
        "reason": choice.reason[:1000],
        "ranking": choice.ranking,
        "candidates": [_candidate(r.as_dict()) for r in choice.ranked],
    }
    if choice.runner_up is not None:
        doc["runnerUp"] = choice.runner_up.gpu.id
    if placement is not None and seen is not None:
        doc["growth"] = placement.growth
        rows = []
        for state in placement.states:
            o = seen.observed.get(state.gpu, fb.TypeObserved())
            row: dict[str, Any] = {
                "type": state.gpu,
                "replicas": placement.split.get(state.gpu, 0),
                "ready": o.ready,
            }
            if state.short_since is not None:
                row.update(unavailableSince=iso(state.short_since), held=state.held,
                           reason=state.reason[:300])  # fmt: skip
            rows.append(row)
        doc["placement"] = rows
    return GpuStatus.model_validate(doc).to_dict()


def _candidate(row: Mapping[str, Any]) -> dict[str, Any]:
    keep = ("gpu", "pricePerHour", "maxCount", "tensorParallelSize", "gpusPerReplica",
            "goodputPerReplica", "costPerMillionGoodRequests", "replicas", "totalGpus",
            "fleetCostPerHour", "problem")  # fmt: skip
    out = {k: row[k] for k in keep if k in row and row[k] is not None}
    out["type"] = out.pop("gpu")
    if "problem" in out:
        out["problem"] = str(out["problem"])[:300]
    return out
