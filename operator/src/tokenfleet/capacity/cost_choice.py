"""The default layout: the lowest GPU cost per good request at the stated workload and SLO.

Without --target-rps and without a fixed --tp, objective `cost` plans one replica of each
layout that fits a node (as the fleet table does; the closed-form model drops those that
cannot start or meet the SLO) and keeps the one whose replica serves a million requests
within the SLO for the fewest GPU-dollars: GPUs x price / goodput capacity, the fleet
table's own `cost_per_million_good_requests`. Equal costs are a tie, which goes to fewer GPUs
per replica (no TP communication to pay, finer scaling steps). The reason names the cost and
the runner-up. `--objective min-gpus` keeps the fewest-GPUs
rule; when no layout serves even one request within the SLO, plan() falls back to it too.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import replace

from tokenfleet.capacity import prefix
from tokenfleet.capacity.errors import PlanError
from tokenfleet.capacity.memory import Layout
from tokenfleet.capacity.types import Plan, PlanRequest

TIE = 1e-9  # relative cost difference counted as a tie: equal costs, to rounding
# Layouts planned in full, cheapest first by the closed-form estimate (performance.predict).
# Its ranking is not good enough to stop at the first few: on 8B / L4 at the default SLO it
# put TP 4 and TP 8 ahead of TP 2, the cheapest in full; 8 covers every single-node layout.
PRESCREEN = 8


def cost_per_million_good(p: Plan) -> float:
    goodput = p.predicted.goodput_requests_per_second
    if goodput <= 0:
        return math.inf
    return p.gpus_per_replica * p.gpu.price_per_hour / (goodput * 3600) * 1e6


def _floor_rps(lay: Layout, req: PlanRequest, cost: float) -> float:
    """The goodput (req/s) at which `lay` costs `cost` per 1M good requests: below it, more
    (cost_per_million_good solved for the goodput). A free GPU (price 0) prices every layout
    at 0: no goodput is too low, nothing is pruned."""
    if cost <= 0:
        return 0.0
    return lay.tp * lay.pp * req.gpu.price_per_hour / (cost * 3600) * 1e6


def _rough(
    order: Callable[[PlanRequest], tuple[bool, float]], req: PlanRequest
) -> tuple[bool, float]:
    try:
        return order(req)
    except PlanError:  # planning it raises again, and skips it
        return True, math.inf


def _label(p: Plan) -> str:
    return f"TP {p.tensor_parallel_size} x PP {p.pipeline_parallel_size}"


def choose(
    req: PlanRequest,
    layouts: list[Layout],
    per_node: int,
    plan: Callable[[PlanRequest], Plan],
    estimate: Callable[[Layout], float],
    bounded: Callable[[PlanRequest, float], Plan] | None = None,
    order: Callable[[PlanRequest], tuple[bool, float]] | None = None,
) -> Plan | None:
    """The cheapest single-node layout per good request, or None when no single-node layout
    starts or none meets the SLO (the caller then applies the fewest-GPUs rule).

    `estimate` is the closed-form model's cost per good request of a layout (inf when it
    does not start or meets the SLO at no rate: not planned); the PRESCREEN cheapest by it
    are planned in full (virtual-time runs, which set the order).

    `bounded(req, floor_rps)`: plan() told that a goodput below floor_rps will be dropped
    (its search then stops early and reports 0). Once two layouts are priced, a layout
    whose goodput would leave it costlier than the second cheapest (beyond TIE) can be
    neither the choice, nor in its tie, nor the runner-up the reason names: the floor is
    the goodput that would price it exactly there, so the outcome is the one of planning
    every layout in full, at a fraction of the goodput-search runs. `order(req)`: a rough
    cost to plan the shortlist by, cheapest first, so that the two cheapest are priced
    early and prune the most (the closed form's order put 8B / L4's cheapest last); the
    plans are then priced in the shortlist's order, so the order changes no outcome."""
    single = [lay for lay in layouts if lay.tp * lay.pp <= per_node]
    rough = sorted(
        ((estimate(lay), lay.tp * lay.pp, lay.pp, lay) for lay in single),
        key=lambda e: e[:3],
    )
    shortlist = [lay for cost, _, _, lay in rough if cost < math.inf][:PRESCREEN]
    subs = [
        replace(
            req, tensor_parallel_size=lay.tp, pipeline_parallel_size=lay.pp, pipeline_auto=False
        )
        for lay in shortlist
    ]
    sequence = list(range(len(subs)))
    if order is not None:
        sequence.sort(key=lambda i: (_rough(order, subs[i]), i))
    planned: dict[int, Plan] = {}
    costs: list[float] = []  # the finite costs priced so far, ascending
    for i in sequence:
        try:
            if bounded is not None and len(costs) >= 2:
                floor = _floor_rps(shortlist[i], req, costs[1] * (1 + TIE))
                planned[i] = bounded(subs[i], floor)
            else:
                planned[i] = plan(subs[i])
        except PlanError:
            continue
        c = cost_per_million_good(planned[i])
        if c < math.inf:
            costs = sorted([*costs, c])
    plans = [planned[i] for i in sorted(planned)]
    priced = sorted(
        ((cost_per_million_good(p), p) for p in plans if cost_per_million_good(p) < math.inf),
        key=lambda cp: (cp[0], cp[1].gpus_per_replica),
    )
    if not priced:
        return None
    best_cost = priced[0][0]
    ties = [cp for cp in priced if cp[0] <= best_cost * (1 + TIE)]
    cost, chosen = min(ties, key=lambda cp: (cp[1].gpus_per_replica, cp[0]))
    rest = [cp for cp in priced if cp[1] is not chosen]
    g = chosen.predicted.goodput_requests_per_second
    why = (
        f"objective cost: lowest GPU cost per good request at {req.input_tokens}/"
        f"{req.output_tokens} tokens within TTFT {req.ttft_slo_ms:g} ms / TPOT "
        f"{req.tpot_slo_ms:g} ms: ${cost:.2f} per 1M good requests ({g:.2f} req/s on "
        f"{chosen.gpus_per_replica} GPU(s))"
    )
    if cost > best_cost:
        why += f", within {TIE:.0%} of the cheapest: the tie goes to fewer GPUs"
    if rest:
        c2, p2 = rest[0]
        why += f"; runner-up {_label(p2)}: ${c2:.2f}"
    dropped = len([c for c, _, _, _ in rough if c < math.inf]) - len(shortlist)
    if dropped > 0:
        why += f"; {dropped} more layout(s) costlier by the closed-form estimate"
    gpus = chosen.gpus_per_replica
    why += prefix.carried(chosen.reason)
    return replace(chosen, reason=f"{_label(chosen)} = {gpus} GPU(s): {why}", request=req)
