"""Each role's replica and goodput, and the best prefill / decode pair. Pure.

Role layouts are the planner's own (plan() at a fixed TP: memory, engine settings, the
pipeline stages a layout needs), one per TP size that starts on the GPU type; the prefill
role is planned for requests of (prompt, 1 token). A pair's TTFT splits into
    client overhead + prefill queue + prefill      (the prefill role's run)
  + KV transfer                                    (link.py)
  + the decode landing: the step running when the KV lands, then its own step,
and the decode role keeps DECODE_LANDING_STEPS steps of the TPOT SLO for its part, the prefill
role the rest. The pair's cost per good request is GPUs x price / goodput summed over the
roles, as if each role ran at its goodput capacity in the ratio the two capacities set.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import lru_cache

from tokenfleet.capacity.disagg import roles as r
from tokenfleet.capacity.disagg.link import KvLink, transfer_seconds
from tokenfleet.capacity.disagg.request import ServingRequest
from tokenfleet.capacity.disagg.rules import pair_problem
from tokenfleet.capacity.disagg.types import Disaggregated, Role, RoleFleet
from tokenfleet.capacity.errors import PlanError
from tokenfleet.capacity.prefix import prefill_tokens
from tokenfleet.capacity.types import Plan, PlanRequest, Prediction

# The decode role's share of the TTFT: the step running when a request's KV lands and the
# step it joins, each at most the TPOT SLO long when the SLO holds.
DECODE_LANDING_STEPS = 2
MAX_EXTRA_REPLICAS = 2  # as capacity/fleet.py: beyond target / goodput when a run misses


@dataclass(frozen=True)
class RoleCapacity:
    plan: Plan
    goodput: float
    ttft_p95_s: float
    tpot_p50_s: float
    saturation: float
    lone_ttft_s: float = 0.0  # a lone request's: what no queue adds to


def _per_node(req: PlanRequest) -> int:
    return min(req.max_gpus_per_node or req.gpu.gpus_per_node, req.gpu.gpus_per_node)


def role_layouts(
    req: PlanRequest, fixed: int | None, planner: Callable[[PlanRequest], Plan]
) -> list[Plan]:
    """One plan per TP size (the largest may add pipeline stages, as plan() does), or the
    fixed one. Layouts that do not start are left out; none starting raises the planner's
    own error for the largest."""
    from tokenfleet.capacity.planner import valid_tp_sizes

    tps = [fixed] if fixed is not None else valid_tp_sizes(req.arch, _per_node(req))
    plans: list[Plan] = []
    error: PlanError | None = None
    for tp in tps:
        sub = replace(
            req,
            tensor_parallel_size=tp,
            pipeline_parallel_size=None,
            pipeline_auto=tp == max(tps),
            target_requests_per_second=None,
            objective="cost",
            serving=ServingRequest(),
        )
        try:
            plans.append(planner(sub))
        except PlanError as e:
            error = e
    if not plans:
        assert error is not None
        raise error
    return plans


@lru_cache(maxsize=256)
def prefill_capacity(p: Plan, prompt: int, budget_s: float) -> RoleCapacity:
    """Requests/s one prefill replica serves with ROLE_ATTAINMENT of them first-token-ready
    (client overhead, queue and prefill) within `budget_s`."""
    from tokenfleet.capacity import step_model

    step = step_model(p)
    replica = r.prefill_replica(p)
    one = r.prefill_one(step, replica, prompt)
    ceiling = r.prefill_saturation(step, replica, prompt)
    rate, at = r.capacity(
        lambda rate: r.prefill_run(step, replica, prompt, budget_s, rate),
        one.ttft_p50 <= budget_s,
        ceiling,
    )
    return RoleCapacity(p, rate, at.ttft_p95 if at else math.inf, 0.0, ceiling, one.ttft_p50)


@lru_cache(maxsize=256)
def decode_capacity(p: Plan, prompt: int, output: int, tpot_slo_s: float) -> RoleCapacity:
    """Requests/s one decode replica serves with ROLE_ATTAINMENT of them landed within
    DECODE_LANDING_STEPS x the TPOT SLO and decoding within it."""
    from tokenfleet.capacity import step_model

    timer = r.DecodeTimer(step_model(p), prompt)
    replica = r.decode_replica(p, prompt)
    slo = (DECODE_LANDING_STEPS * tpot_slo_s, tpot_slo_s)
    one = r.decode_one(timer, replica, prompt, output)
    ceiling = r.decode_saturation(timer, replica, prompt, output)
    rate, at = r.capacity(
        lambda rate: r.decode_run(timer, replica, prompt, output, slo, rate),
        one.ttft_p50 <= slo[0] and one.tpot_p50 <= slo[1],
        ceiling,
    )
    return RoleCapacity(
        p,
        rate,
        at.ttft_p95 if at else math.inf,
        at.tpot_p50 if at else math.inf,
        ceiling,
        one.ttft_p50,
    )


def decode_only_tpot(p: Plan, prompt: int, output: int, rate: float) -> float:
    """Median TPOT of `p`'s layout run as a decode replica at `rate` (no prefill chunks)."""
    from tokenfleet.capacity import step_model

    timer = r.DecodeTimer(step_model(p), prompt)
    replica = r.decode_replica(p, prompt)
    return r.decode_run(timer, replica, prompt, output, (math.inf, math.inf), rate).tpot_p50


def _cost(req: PlanRequest, p: RoleCapacity, d: RoleCapacity) -> float:
    if p.goodput <= 0 or d.goodput <= 0:
        return math.inf
    price = req.gpu.price_per_hour
    per_request = p.plan.gpus_per_replica / p.goodput + d.plan.gpus_per_replica / d.goodput
    return per_request * price / 3600 * 1e6


def _role(name: str, c: RoleCapacity, budget_s: float, req: PlanRequest) -> Role:
    """The role's record; its plan's prediction and reason are the role's own (at its
    goodput), not those of the aggregated runs plan() sized it with."""
    ttft = c.ttft_p95_s * 1e3 if math.isfinite(c.ttft_p95_s) else 0.0
    tpot = c.tpot_p50_s * 1e3 if math.isfinite(c.tpot_p50_s) else 0.0
    prediction = replace(
        c.plan.predicted,
        ttft_ms=ttft,
        ttft_p95_ms=ttft,
        ttft_p99_ms=ttft,
        tpot_ms=tpot,
        itl_ms=tpot,
        goodput_requests_per_second=c.goodput,
        goodput_ttft_p95_ms=ttft,
        goodput_tpot_ms=tpot,
        saturation_requests_per_second=c.saturation,
    )
    p = c.plan
    layout = f"TP {p.tensor_parallel_size} x PP {p.pipeline_parallel_size}"
    reason = (
        f"{layout} = {p.gpus_per_replica} GPU(s): the {name} role of disaggregated serving, "
        f"{c.goodput:.2f} req/s per replica within its {budget_s * 1e3:.0f} ms share of TTFT"
    )
    plan = replace(p, predicted=prediction, request=req, reason=reason)
    return Role(
        "prefill" if name == "prefill" else "decode",
        plan,
        c.goodput,
        budget_s * 1e3,
        c.ttft_p95_s * 1e3 if math.isfinite(c.ttft_p95_s) else math.inf,
        c.tpot_p50_s * 1e3 if math.isfinite(c.tpot_p50_s) else 0.0,
        c.saturation,
        max(0.0, budget_s - c.lone_ttft_s) * 1e3,
    )


@dataclass(frozen=True)
class PairSearch:
    """The best pair, or why there is none."""

    best: Disaggregated | None
    unavailable: str


def best_pair(req: PlanRequest, link: KvLink, planner: Callable[[PlanRequest], Plan]) -> PairSearch:
    s = req.serving
    prompt = req.input_tokens
    compute = prefill_tokens(req.input_tokens, req.prefix_cache_hit_rate)
    prefill_req = replace(req, output_tokens=1)
    prefills = role_layouts(prefill_req, s.prefill_tp, planner)
    decodes = role_layouts(req, s.decode_tp, planner)
    ttft_s, tpot_s = req.ttft_slo_ms / 1e3, req.tpot_slo_ms / 1e3
    landing_s = DECODE_LANDING_STEPS * tpot_s
    best: tuple[float, int, Disaggregated] | None = None
    reasons: list[str] = []
    for d_plan in decodes:
        d = decode_capacity(d_plan, prompt, req.output_tokens, tpot_s)
        if d.goodput <= 0:
            reasons.append(f"decode TP {d_plan.tensor_parallel_size} misses the TPOT SLO")
            continue
        for p_plan in prefills:
            problem = pair_problem(
                req.arch,
                req.engine,
                req.engine_version,
                p_plan.tensor_parallel_size,
                d_plan.tensor_parallel_size,
                s.backend,
            )
            if problem is not None:
                reasons.append(problem)
                continue
            transfer = transfer_seconds(
                prompt, p_plan.kv_bytes_per_token, d_plan.kv_bytes_per_token, link
            )
            budget = ttft_s - transfer - landing_s
            if budget <= 0:
                reasons.append(
                    f"the KV transfer ({transfer * 1e3:.0f} ms) and the decode landing "
                    f"({landing_s * 1e3:.0f} ms) leave no prefill time in TTFT "
                    f"{req.ttft_slo_ms:g} ms"
                )
                continue
            p = prefill_capacity(p_plan, compute, round(budget, 6))
            cost = _cost(req, p, d)
            if not math.isfinite(cost):
                reasons.append(
                    f"prefill TP {p_plan.tensor_parallel_size} misses its "
                    f"{budget * 1e3:.0f} ms share of TTFT"
                )
                continue
            gpus = p_plan.gpus_per_replica + d_plan.gpus_per_replica
            option = Disaggregated(
                _role("prefill", p, budget, req),
                _role("decode", d, landing_s, req),
                link,
                transfer * 1e3,
                cost,
                (p.ttft_p95_s + transfer + d.ttft_p95_s) * 1e3,
            )
            if best is None or (cost, gpus) < best[:2]:
                best = (cost, gpus, option)
    if best is None:
        why = reasons[-1] if reasons else "no layout starts"
        return PairSearch(None, why)
    chosen = replace(best[2], band=ratio_band(req, best[2]))
    if req.target_requests_per_second is not None:
        chosen = replace(chosen, fleet=role_fleet(req, chosen, req.target_requests_per_second))
    return PairSearch(chosen, "")


# The request mix the autoscaler keeps the ratio for: prompts half and twice as long as
# planned (prefill work per request scales with the prompt, decode work barely).
BAND_PROMPT_FACTORS = (0.5, 2.0)


def ratio_band(req: PlanRequest, d: Disaggregated) -> tuple[float, float]:
    """Prefill replicas per decode replica, on the pair's layouts, at prompts half and
    twice the planned length (each clamped to what the decode role's context holds): the
    band inside which the autoscaler keeps the two pools, so that neither starves the other
    while the mix moves that far. A length no role serves leaves that side at the planned
    ratio."""
    ratios = [d.prefill_per_decode]
    p_plan, d_plan = d.prefill.plan, d.decode.plan
    tpot_s = req.tpot_slo_ms / 1e3
    for factor in BAND_PROMPT_FACTORS:
        prompt = max(1, round(req.input_tokens * factor))
        prompt = min(prompt, d_plan.max_model_len - req.output_tokens)
        transfer = transfer_seconds(prompt, p_plan.kv_bytes_per_token, d_plan.kv_bytes_per_token,
                                    d.link)  # fmt: skip
        budget = req.ttft_slo_ms / 1e3 - transfer - DECODE_LANDING_STEPS * tpot_s
        if budget <= 0 or prompt < 1:
            continue
        p = prefill_capacity(p_plan, prefill_tokens(prompt, req.prefix_cache_hit_rate),
                             round(budget, 6))  # fmt: skip
        dc = decode_capacity(d_plan, prompt, req.output_tokens, tpot_s)
        if p.goodput > 0 and dc.goodput > 0:
            ratios.append(dc.goodput / p.goodput)
    return min(ratios), max(ratios)


def role_fleet(req: PlanRequest, d: Disaggregated, target: float) -> RoleFleet:
    """xP + yD for `target` req/s: ceil(target / goodput) per role, each run at its share of
    the target and given another replica (up to MAX_EXTRA_REPLICAS) while it misses."""
    from tokenfleet.capacity import step_model

    prompt = req.input_tokens
    compute = prefill_tokens(req.input_tokens, req.prefix_cache_hit_rate)
    p_plan, d_plan = d.prefill.plan, d.decode.plan
    p_step, p_rep = step_model(p_plan), r.prefill_replica(p_plan)
    d_timer = r.DecodeTimer(step_model(d_plan), prompt)
    d_rep = r.decode_replica(d_plan, prompt)
    tpot_s = req.tpot_slo_ms / 1e3
    slo = (DECODE_LANDING_STEPS * tpot_s, tpot_s)
    budget = d.prefill.ttft_budget_ms / 1e3

    def sized(goodput: float, run: Callable[[float], object]) -> int:
        n = max(1, math.ceil(target / goodput - 1e-9))
        for _ in range(MAX_EXTRA_REPLICAS):
            if r.passes(run(target / n)):  # type: ignore[arg-type]
                break
            n += 1
        return n

    x = sized(
        d.prefill.goodput_requests_per_second,
        lambda rate: r.prefill_run(p_step, p_rep, compute, round(budget, 6), rate),
    )
    y = sized(
        d.decode.goodput_requests_per_second,
        lambda rate: r.decode_run(d_timer, d_rep, prompt, req.output_tokens, slo, rate),
    )
    gpus = x * p_plan.gpus_per_replica + y * d_plan.gpus_per_replica
    return RoleFleet(target, x, y, gpus, gpus * req.gpu.price_per_hour)


def composed_prediction(d: Disaggregated) -> Prediction:
    """The whole path's numbers at the roles' goodput: TTFT = prefill + transfer + landing;
    TPOT the decode role's; goodput the decode role's per replica (a decode replica is what
    carries a request to its end)."""
    pre, dec = d.prefill, d.decode
    base = dec.plan.predicted
    ttft = pre.plan.predicted.goodput_ttft_p95_ms + d.transfer_ms + dec.ttft_p95_ms
    return replace(
        base,
        ttft_ms=ttft,
        ttft_p95_ms=ttft,
        ttft_p99_ms=ttft,
        tpot_ms=dec.tpot_ms,
        itl_ms=dec.tpot_ms,
        goodput_requests_per_second=dec.goodput_requests_per_second,
        goodput_ttft_p95_ms=ttft,
        goodput_tpot_ms=dec.tpot_ms,
        saturation_requests_per_second=dec.saturation_requests_per_second,
    )
