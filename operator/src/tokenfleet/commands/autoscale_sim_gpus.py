"""`tokenfleet autoscale-sim --gpu a,b,c`: the same trace, SLO and autoscaling on each GPU
type (each at its own best layout, as `plan --gpu` ranks them), side by side: what each
policy reaches and what it costs in GPU-hours and dollars, per type."""

from __future__ import annotations

import dataclasses
from typing import Any

from tokenfleet.autoscale.fleetsim.frontier import FrontierPoint, cheapest_meeting
from tokenfleet.autoscale.fleetsim.run import RunResult, Setup
from tokenfleet.capacity.gpu_choice import GpuCandidate
from tokenfleet.capacity.types import PlanRequest


@dataclasses.dataclass(frozen=True)
class TypeRun:
    candidate: GpuCandidate
    setup: Setup
    results: dict[str, RunResult]
    frontier: tuple[FrontierPoint, ...]

    @property
    def price(self) -> float:
        return self.candidate.gpu.price_per_hour


def run_types(
    trace: Any, options: Any, policies: tuple[str, ...], with_frontier: bool
) -> list[TypeRun]:
    """One replay per type of options.request's candidates: the LLMService and the request
    on that type alone (its own layout)."""
    from tokenfleet.autoscale.fleetsim.frontier import frontier
    from tokenfleet.autoscale.fleetsim.run import run as simulate
    from tokenfleet.autoscale.fleetsim.run import with_flags

    request: PlanRequest = options.request
    out = []
    for cand in request.gpu_candidates:
        typed = dataclasses.replace(request, gpu=cand.gpu, gpu_candidates=())
        spec = with_flags(options.spec, gpu=cand.gpu.id)
        opts = dataclasses.replace(options, spec=spec, request=typed)
        setup, results = simulate(trace, opts, policies)
        points = frontier(setup) if with_frontier else ()
        out.append(TypeRun(cand, setup, results, points))
    return out


def _layout(run: TypeRun) -> str:
    return f"{run.setup.shape.gpus} GPU(s)"


def table(runs: list[TypeRun]) -> str:
    first = runs[0].setup
    o = first.options
    lines = [
        f"trace {first.trace.name}: {len(first.trace.requests):,} requests; {o.model}, SLO TTFT "
        f"{o.ttft_ms:g} ms + TPOT {o.tpot_ms:g} ms at {o.attainment:.0%}, cold start "
        f"{o.cold_start:g} s; each GPU type at its own best layout",
        "",
        f"{'GPU':<22}{'layout':<14}{'$/GPU-h':>8}{'req/s/rep':>10}  {'policy':<11}"
        f"{'attainment':>11}{'GPU-hours':>10}{'$':>8}  cheapest fixed fleet meeting the SLO",
    ]
    for run in runs:
        meets = cheapest_meeting(run.frontier, run.setup.options.attainment)
        fixed = (
            f"N={meets.replicas}: {meets.attainment:.2%} / {meets.gpu_hours:.2f} GPU-h "
            f"(${meets.gpu_hours * run.price:.2f})"
            if meets is not None
            else ("none within the frontier" if run.frontier else "-")
        )
        for i, (name, r) in enumerate(run.results.items()):
            head = (
                f"{run.candidate.gpu.id:<22}{_layout(run):<14}{run.price:>8.2f}"
                f"{run.setup.measured_capacity:>10.2f}"
                if i == 0
                else " " * 54
            )
            lines.append(
                f"{head}  {name:<11}{r.attainment:>11.2%}{r.gpu_hours:>10.2f}"
                f"{r.gpu_hours * run.price:>8.2f}  {fixed if i == 0 else ''}".rstrip()
            )
    lines += ["", verdict(runs)]
    return "\n".join(lines)


def verdict(runs: list[TypeRun]) -> str:
    """Which type serves the trace best under our autoscaler: one that reaches at least
    every other type's attainment for no more dollars dominates; else the trade-off."""
    ours = [(run, r) for run in runs if (r := run.results.get("tokenfleet")) is not None]
    if not ours:
        return "(the tokenfleet policy was not replayed: no verdict)"

    def dollars(pair: tuple[TypeRun, RunResult]) -> float:
        return pair[1].gpu_hours * pair[0].price

    said = "; ".join(
        f"{run.candidate.gpu.id} {r.attainment:.2%} for ${dollars((run, r)):.2f}" for run, r in ours
    )
    for pair in ours:
        if all(
            pair[1].attainment >= other[1].attainment - 1e-9 and dollars(pair) <= dollars(other)
            for other in ours
        ):
            return f"ours: {said}: {pair[0].candidate.gpu.id} reaches the most for the least"
    return f"ours: {said}: more attainment costs more here; choose by the SLO you need"


def to_json(runs: list[TypeRun]) -> dict[str, Any]:
    from tokenfleet.autoscale.fleetsim import report

    return {
        "trace": runs[0].setup.trace.name,
        "gpuTypes": [
            {
                "gpu": run.candidate.gpu.id,
                "pricePerHour": run.price,
                "gpusPerReplica": run.setup.shape.gpus,
                "capacityPerReplica": round(run.setup.measured_capacity, 3),
                "target": round(run.setup.target, 4),
                "policies": {
                    name: {
                        "sloAttainment": round(r.attainment, 4),
                        "gpuHours": round(r.gpu_hours, 3),
                        "dollars": round(r.gpu_hours * run.price, 2),
                        "scaleEvents": r.scale_events,
                    }
                    for name, r in run.results.items()
                },
                "staticFrontier": report.frontier_json(run.frontier),
            }
            for run in runs
        ],
    }
