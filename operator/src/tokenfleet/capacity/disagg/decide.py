"""Aggregated or disaggregated: the cheaper per good request, and why. Pure.

plan() hands a request whose serving mode is `disaggregated` or `auto` here. The best
aggregated plan is the planner's own (cost_choice, or the cheapest fleet at a target rate);
the best disaggregated one is the cheapest prefill / decode pair the engines accept
(sizing.py). They are compared by GPU cost per million good requests, or at a target rate by
the fleets' cost per hour. `auto` takes disaggregation only where it is strictly cheaper;
`disaggregated` takes it whatever it costs (and says what it costs). The `why` line names
the winner, the margin, the prefill interference the aggregated replica pays on its TPOT,
the KV transfer, and the prompt length that would turn the decision around.

`auto` asks for more than "cheaper": disaggregation must cost less than aggregated by more
than MARGIN, the goodput search's resolution (load.RESOLUTION: each capacity is the lower end
of a bracket up to that wide), so a difference the searches cannot resolve never buys a
second role, a KV link and a routing profile.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import replace

from tokenfleet.capacity.cost_choice import cost_per_million_good
from tokenfleet.capacity.disagg.link import kv_link
from tokenfleet.capacity.disagg.request import ServingRequest
from tokenfleet.capacity.disagg.rules import check_version
from tokenfleet.capacity.disagg.sizing import (
    best_pair,
    composed_prediction,
    decode_capacity,
    decode_only_tpot,
    prefill_capacity,
)
from tokenfleet.capacity.disagg.types import Disaggregated, ServingDecision
from tokenfleet.capacity.errors import PlanError
from tokenfleet.capacity.load import RESOLUTION
from tokenfleet.capacity.prefix import prefill_tokens
from tokenfleet.capacity.types import Plan, PlanRequest

Planner = Callable[[PlanRequest], Plan]
MARGIN = RESOLUTION
# Prompt lengths the flip scan tries, as multiples of the request's (in the direction that
# could turn the decision around), stopping at the first that does.
FLIP_FACTORS = (2, 4, 8, 16)


def _layout(p: Plan) -> str:
    return f"TP {p.tensor_parallel_size} x PP {p.pipeline_parallel_size}"


def _aggregated_cost(p: Plan) -> float:
    if p.fleet is not None:
        return p.fleet.chosen.cost_per_hour
    return cost_per_million_good(p)


def _pd_cost(d: Disaggregated) -> float:
    return d.fleet.cost_per_hour if d.fleet is not None else d.cost_per_million_good_requests


def plan_serving(req: PlanRequest, planner: Planner) -> Plan:
    """The plan for `req.serving.mode` disaggregated or auto (module docstring)."""
    s = req.serving
    aggregated_req = replace(req, serving=ServingRequest())
    aggregated: Plan | None = None
    aggregated_error: PlanError | None = None
    try:
        aggregated = planner(aggregated_req)
    except PlanError as e:
        aggregated_error = e
    pd, unavailable = _disaggregated(req, planner)
    if s.mode == "disaggregated" and pd is None:
        raise PlanError(
            "serving",
            "disaggregated",
            f"no prefill / decode pair serves this workload within the SLO: {unavailable}",
            "relax the SLO, use a faster KV link (--kv-network-gbps), or serve aggregated",
        )
    if aggregated is None and pd is None:
        assert aggregated_error is not None
        raise aggregated_error
    agg_cost = _aggregated_cost(aggregated) if aggregated is not None else math.inf
    pd_cost = _pd_cost(pd) if pd is not None else math.inf
    disaggregate = pd is not None and (
        s.mode == "disaggregated" or pd_cost < agg_cost * (1 - MARGIN)
    )
    interference = _interference(aggregated) if aggregated is not None else None
    flip = _flip(req, planner, aggregated, pd, pd_cost < agg_cost * (1 - MARGIN))
    why = _why(req, aggregated, pd, unavailable, disaggregate, interference, flip)
    decision = ServingDecision(
        asked=s.mode,
        mode="disaggregated" if disaggregate else "aggregated",
        aggregated_cost=(cost_per_million_good(aggregated) if aggregated is not None else math.inf),
        aggregated_layout=_layout(aggregated) if aggregated is not None else "",
        disaggregated=pd,
        unavailable=unavailable,
        interference=interference,
        flip=flip,
        why=why,
        aggregated_fleet=aggregated.fleet if aggregated is not None else None,
    )
    if not disaggregate:
        assert aggregated is not None
        return replace(aggregated, serving=decision, request=req)
    assert pd is not None
    top = pd.decode.plan
    return replace(
        top,
        predicted=composed_prediction(pd),
        reason=f"{_layout(top)} decode = {top.gpus_per_replica} GPU(s): {why}",
        serving=decision,
        request=req,
        fleet=None,
    )


def _disaggregated(req: PlanRequest, planner: Planner) -> tuple[Disaggregated | None, str]:
    s = req.serving
    try:
        check_version(req.engine, req.engine_version)
    except PlanError as e:
        if s.mode == "disaggregated":
            raise
        return None, e.problem
    link = kv_link(req.gpu, s.link, s.network_gbit)
    try:
        search = best_pair(req, link, planner)
    except PlanError as e:
        if s.mode == "disaggregated":
            raise
        return None, str(e)
    return search.best, search.unavailable


def _interference(p: Plan) -> float | None:
    """Share of the aggregated replica's TPOT at its goodput that its prefill chunks cost:
    1 - TPOT of the same layout as a decode-only replica at the same rate / its TPOT."""
    req = p.request
    rate = p.predicted.goodput_requests_per_second
    tpot = p.predicted.goodput_tpot_ms / 1e3
    if req is None or rate <= 0 or tpot <= 0:
        return None
    alone = decode_only_tpot(p, req.input_tokens, req.output_tokens, rate)
    if not math.isfinite(alone) or alone <= 0:
        return None
    return max(0.0, 1.0 - alone / tpot)


def _costs_at(
    req: PlanRequest, planner: Planner, aggregated: Plan, pd: Disaggregated, prompt: int
) -> tuple[float, float]:
    """Both kinds' cost per good request at another prompt length, each on its own chosen
    layouts (the pair keeps its TPs and the prefill its TTFT share less the new transfer)."""
    from tokenfleet.capacity.disagg.link import transfer_seconds
    from tokenfleet.capacity.disagg.sizing import DECODE_LANDING_STEPS

    at = replace(
        req,
        input_tokens=prompt,
        serving=ServingRequest(),
        target_requests_per_second=None,
        tensor_parallel_size=aggregated.tensor_parallel_size,
        pipeline_parallel_size=aggregated.pipeline_parallel_size,
        pipeline_auto=False,
    )
    try:
        agg = cost_per_million_good(planner(at))
    except PlanError:
        agg = math.inf
    p_plan, d_plan = pd.prefill.plan, pd.decode.plan
    tpot_s = req.tpot_slo_ms / 1e3
    transfer = transfer_seconds(prompt, p_plan.kv_bytes_per_token, d_plan.kv_bytes_per_token,
                                pd.link)  # fmt: skip
    budget = req.ttft_slo_ms / 1e3 - transfer - DECODE_LANDING_STEPS * tpot_s
    if budget <= 0 or prompt + req.output_tokens > d_plan.max_model_len:
        return agg, math.inf
    compute = prefill_tokens(prompt, req.prefix_cache_hit_rate)
    p = prefill_capacity(p_plan, compute, round(budget, 6))
    d = decode_capacity(d_plan, prompt, req.output_tokens, tpot_s)
    if p.goodput <= 0 or d.goodput <= 0:
        return agg, math.inf
    price = req.gpu.price_per_hour
    cost = (p_plan.gpus_per_replica / p.goodput + d_plan.gpus_per_replica / d.goodput) * price
    return agg, cost / 3600 * 1e6


def _flip(
    req: PlanRequest,
    planner: Planner,
    aggregated: Plan | None,
    pd: Disaggregated | None,
    pd_cheaper: bool,
) -> str:
    """The prompt length at which the cost comparison would go the other way, on the same
    layouts: longer prompts where aggregated wins it (prefill grows, and with it the
    interference it puts on decode), shorter where disaggregation does (by MARGIN)."""
    if aggregated is None or pd is None:
        return ""
    limit = aggregated.max_model_len - req.output_tokens
    for factor in FLIP_FACTORS:
        prompt = req.input_tokens * factor if not pd_cheaper else req.input_tokens // factor
        if prompt > limit or prompt < 16:
            break
        agg, split = _costs_at(req, planner, aggregated, pd, prompt)
        wins = split < agg * (1 - MARGIN)
        if not pd_cheaper and wins:
            return f"disaggregation pays from ~{prompt:,}-token prompts (same layouts)"
        if pd_cheaper and not wins:
            return f"aggregated is cheaper at ~{prompt:,}-token prompts (same layouts)"
    last = (
        min(req.input_tokens * FLIP_FACTORS[-1], limit)
        if not pd_cheaper
        else max(req.input_tokens // FLIP_FACTORS[-1], 16)
    )
    return f"no prompt length from {req.input_tokens:,} to {last:,} tokens turns it (same layouts)"


def _why(
    req: PlanRequest,
    aggregated: Plan | None,
    pd: Disaggregated | None,
    unavailable: str,
    disaggregate: bool,
    interference: float | None,
    flip: str,
) -> str:
    shape = f"{req.input_tokens}/{req.output_tokens} tokens"
    per = "per hour" if req.target_requests_per_second is not None else "per 1M good requests"
    agg_cost = _aggregated_cost(aggregated) if aggregated is not None else math.inf
    parts: list[str] = []
    if pd is None:
        parts.append(f"aggregated: no disaggregated pair at {shape} ({unavailable})")
    else:
        pd_cost = _pd_cost(pd)
        unit = (
            f"{pd.fleet.prefill_replicas} x {pd.prefill.layout} prefill + "
            f"{pd.fleet.decode_replicas} x {pd.decode.layout} decode"
            if pd.fleet is not None
            else pd.label()
        )
        agg = (
            f"aggregated {_layout(aggregated)} ${agg_cost:,.2f}"
            if aggregated is not None and math.isfinite(agg_cost)
            else "no aggregated plan meets the SLO"
        )
        margin = f" ({(pd_cost / agg_cost - 1) * 100:+.0f}%)" if math.isfinite(agg_cost) else ""
        if disaggregate:
            forced = " (asked for)" if req.serving.mode == "disaggregated" else ""
            parts.append(
                f"disaggregated{forced} at {shape}: {unit}, ${pd_cost:,.2f} {per}{margin} "
                f"against {agg}"
            )
        else:
            parts.append(
                f"aggregated at {shape}: {agg} {per} against disaggregated {unit} "
                f"${pd_cost:,.2f}{margin}"
                + (
                    f", inside the {MARGIN:.0%} the goodput searches resolve"
                    if pd_cost < agg_cost
                    else ""
                )
            )
        parts.append(f"KV transfer {pd.transfer_ms:.1f} ms per request over {pd.link.label()}")
    if interference is not None:
        parts.append(f"prefill interference costs {interference:.0%} of aggregated TPOT")
    if flip:
        parts.append(flip)
    return "; ".join(parts)
