"""The GPU type as a decision: rank (type, layout) pairs and keep the cheapest.

Each candidate type is planned in full as if it were the only one (plan() picks its own
best layout: capacity/cost_choice.py), so a type is compared at its best layout. Without a
target rate the ranking is the GPU cost per good request, GPUs x price / goodput capacity
(the same cost cost_choice ranks layouts by); with a target rate it is the cheapest fleet
that serves the rate within the SLO, $/hour (capacity/fleet.py). A candidate's `max_count`
(the most GPUs of that type the cluster can give) leaves it out when one replica, or the
fleet for the target, needs more. Equal costs (within cost_choice.TIE) go to fewer GPUs,
then to the order the candidates were given in. The chosen Plan carries the whole
comparison in `Plan.choice`. A type the configured placement provider does not offer
(capacity/placement.py: no L40S on GKE) is left out. The fallback (autoscale/gpu_fallback.py)
moves replicas to the next usable candidate in this order.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal

from tokenfleet.capacity.cost_choice import TIE, cost_per_million_good
from tokenfleet.capacity.errors import PlanError
from tokenfleet.capacity.gpus import GPU
from tokenfleet.capacity.placement import node_selection
from tokenfleet.capacity.types import Plan, PlanRequest
from tokenfleet.errors import UserError


@dataclass(frozen=True)
class GpuCandidate:
    """A GPU type the planner may choose: `gpu` with the price to rank it at."""

    gpu: GPU
    max_count: int | None = None  # most GPUs of this type the cluster gives (None: no limit)


# The cluster's offers (the operator's GPU catalog overlay, `offers:`): what spec.gpu.type
# auto chooses from when its spec names no candidates. Set once at start-up.
OFFERS: list[GpuCandidate] = []


@dataclass(frozen=True)
class Ranked:
    """One candidate, planned: its best layout and cost, or why it was left out."""

    gpu: GPU
    max_count: int | None
    plan: Plan | None
    # $ per 1M good requests; with a target rate, the fleet's $ per hour. inf when left out.
    cost: float
    problem: str | None = None

    @property
    def usable(self) -> bool:
        return self.problem is None and self.plan is not None

    @property
    def gpus(self) -> int:
        """GPUs the ranking charged: per replica, or the whole fleet for a target rate."""
        if self.plan is None:
            return 0
        fleet = self.plan.fleet
        return fleet.chosen.total_gpus if fleet is not None else self.plan.gpus_per_replica

    def as_dict(self) -> dict[str, Any]:
        doc: dict[str, Any] = {"gpu": self.gpu.id, "pricePerHour": self.gpu.price_per_hour}
        if self.max_count is not None:
            doc["maxCount"] = self.max_count
        p = self.plan
        if p is not None:
            doc.update({
                "tensorParallelSize": p.tensor_parallel_size,
                "pipelineParallelSize": p.pipeline_parallel_size,
                "gpusPerReplica": p.gpus_per_replica,
                "goodputPerReplica": round(p.predicted.goodput_requests_per_second, 3),
                "costPerMillionGoodRequests": _rounded(cost_per_million_good(p)),
            })  # fmt: skip
            if p.fleet is not None:
                doc.update({
                    "replicas": p.fleet.chosen.replicas,
                    "totalGpus": p.fleet.chosen.total_gpus,
                    "fleetCostPerHour": round(p.fleet.chosen.cost_per_hour, 2),
                    "ttftP95Ms": round(p.fleet.chosen.ttft_p95_ms, 1),
                })  # fmt: skip
        if self.problem is not None:
            doc["problem"] = self.problem
        return doc


def _rounded(value: float) -> float | None:
    return None if math.isinf(value) else round(value, 2)


Ranking = Literal["per-request", "fleet"]


@dataclass(frozen=True)
class GpuChoice:
    """The comparison behind a chosen type: usable candidates cheapest first, then the
    ones left out in the order given."""

    ranking: Ranking
    ranked: tuple[Ranked, ...]
    reason: str
    target_requests_per_second: float | None = None

    @property
    def usable(self) -> tuple[Ranked, ...]:
        return tuple(r for r in self.ranked if r.usable)

    @property
    def chosen(self) -> Ranked:
        return self.usable[0]

    @property
    def runner_up(self) -> Ranked | None:
        usable = self.usable
        return usable[1] if len(usable) > 1 else None

    def plan_for(self, gpu_id: str) -> Plan | None:
        return next((r.plan for r in self.usable if r.gpu.id == gpu_id), None)

    def as_dict(self) -> dict[str, Any]:
        doc: dict[str, Any] = {
            "ranking": self.ranking,
            "chosen": self.chosen.gpu.id,
            "candidates": [r.as_dict() for r in self.ranked],
            "reason": self.reason,
        }
        if self.runner_up is not None:
            doc["runnerUp"] = self.runner_up.gpu.id
        if self.target_requests_per_second is not None:
            doc["targetRequestsPerSecond"] = self.target_requests_per_second
        return doc


def _one(req: PlanRequest, cand: GpuCandidate, plan: Callable[[PlanRequest], Plan]) -> Ranked:
    sub = replace(req, gpu=cand.gpu, gpu_candidates=())
    try:
        node_selection(cand.gpu)  # the cluster's nodes can carry it (capacity/placement.py)
    except UserError as error:
        return Ranked(cand.gpu, cand.max_count, None, math.inf, error.problem)
    try:
        p = plan(sub)
    except UserError as error:  # a PlanError, or a refusal of the request on this type
        return Ranked(cand.gpu, cand.max_count, None, math.inf, f"{error.problem}")
    limit = cand.max_count
    if p.fleet is not None:
        c = p.fleet.chosen
        if limit is not None and c.total_gpus > limit:
            problem = (
                f"needs {c.total_gpus} GPUs for the target rate, more than its maxCount {limit}"
            )
            return Ranked(cand.gpu, limit, p, math.inf, problem)
        return Ranked(cand.gpu, limit, p, c.cost_per_hour)
    if limit is not None and p.gpus_per_replica > limit:
        problem = f"one replica needs {p.gpus_per_replica} GPUs, more than its maxCount {limit}"
        return Ranked(cand.gpu, limit, p, math.inf, problem)
    cost = cost_per_million_good(p)
    if math.isinf(cost):
        return Ranked(cand.gpu, limit, p, cost, "meets the SLO at no request rate")
    return Ranked(cand.gpu, limit, p, cost)


def _label(r: Ranked, ranking: Ranking) -> str:
    p = r.plan
    assert p is not None
    layout = f"TP {p.tensor_parallel_size} x PP {p.pipeline_parallel_size}"
    if ranking == "fleet" and p.fleet is not None:
        c = p.fleet.chosen
        return f"{r.gpu.id} ({c.replicas} x {layout} = {c.total_gpus} GPUs, ${r.cost:.2f}/h)"
    return (
        f"{r.gpu.id} ({layout}, {p.predicted.goodput_requests_per_second:.2f} req/s per replica "
        f"at ${r.gpu.price_per_hour:.2f}/GPU-hour: ${r.cost:.2f} per 1M good requests)"
    )


def _reason(
    ranking: Ranking, usable: list[Ranked], left: list[Ranked], target: float | None
) -> str:
    chosen = usable[0]
    what = (
        f"the cheapest fleet for {target:g} req/s within the SLO"
        if ranking == "fleet" and target is not None
        else "the lowest GPU cost per good request"
    )
    text = f"GPU type {_label(chosen, ranking)}: {what} of {len(usable) + len(left)} candidates"
    if len(usable) > 1:
        text += f"; runner-up {_label(usable[1], ranking)}"
    if len(usable) > 2:
        text += f"; {len(usable) - 2} more costlier"
    for r in left:
        text += f"; {r.gpu.id} left out: {r.problem}"
    return text


def choose(req: PlanRequest, plan: Callable[[PlanRequest], Plan]) -> Plan:
    """The chosen type's plan, carrying the comparison (Plan.choice). PlanError when no
    candidate can serve the workload, naming each one's problem."""
    candidates: Sequence[GpuCandidate] = req.gpu_candidates
    ranking: Ranking = "fleet" if req.target_requests_per_second is not None else "per-request"
    results = [_one(req, c, plan) for c in candidates]
    order = {id(r): i for i, r in enumerate(results)}
    usable = sorted((r for r in results if r.usable), key=lambda r: (r.cost, order[id(r)]))
    left = [r for r in results if not r.usable]
    if not usable:
        names = ",".join(c.gpu.id for c in candidates)
        why = "; ".join(f"{r.gpu.id}: {r.problem}" for r in left)
        raise PlanError(
            "gpu",
            names,
            f"no candidate GPU type can serve this workload ({why})"[:900],
            "add a larger GPU type, raise a maxCount, relax the SLO or shorten the context",
        )
    if len(usable) > 1:
        # Equal costs (to rounding) go to fewer GPUs, then to the order given.
        best = usable[0].cost
        ties = [r for r in usable if r.cost <= best * (1 + TIE)]
        first = min(ties, key=lambda r: (r.gpus, order[id(r)]))
        usable.remove(first)
        usable.insert(0, first)
    choice = GpuChoice(
        ranking,
        tuple(usable + left),
        _reason(ranking, usable, left, req.target_requests_per_second),
        req.target_requests_per_second,
    )
    chosen = usable[0].plan
    assert chosen is not None
    layout, _, why = chosen.reason.partition(": ")
    return replace(chosen, reason=f"{layout}: {choice.reason}; layout: {why}", choice=choice)
