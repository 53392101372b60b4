"""The planner's speculative step: the replica with the proposer and without it, on the same
layout, and the one to run.

Policy `auto` (the default) never renders speculation that lowers goodput at the stated
workload: the goodput capacity (req/s within the SLO) with the proposer is compared with the
same layout's without it, and where it is lower the plan is the one without speculation (its
layout chosen afresh), saying why. Policy `always` renders it as asked and says what it costs.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from tokenfleet.capacity.speculative import SpeculativePlan, check_request
from tokenfleet.capacity.types import Plan, PlanRequest

PlanFn = Callable[[PlanRequest], Plan]


def _workload(req: PlanRequest) -> str:
    return f"{req.concurrency} x {req.input_tokens}/{req.output_tokens}"


def summary(sp: SpeculativePlan, req: PlanRequest) -> str:
    """One clause for the why line: the trade at the stated workload, and where it ends."""
    head = (
        f"speculation {sp.method} K={sp.num_speculative_tokens} (acceptance "
        f"{sp.acceptance_rate:.2f}, {sp.tokens_per_step:.2f} tokens/step)"
    )
    trade = (
        f"TPOT {sp.tpot_without_ms:.1f} -> {sp.tpot_with_ms:.1f} ms, goodput "
        f"{sp.goodput_without:.2f} -> {sp.goodput_with:.2f} req/s at {_workload(req)}"
    )
    ends = (
        f"; a speculative token costs more than a plain one from batch {sp.crossover_batch}"
        if sp.crossover_batch is not None
        else "; it pays at every batch the replica runs"
    )
    pays = sp.goodput_with > sp.goodput_without or (
        sp.goodput_with == sp.goodput_without and sp.tpot_with_ms <= sp.tpot_without_ms
    )
    if sp.enabled and pays:
        return f"{head} pays: {trade}{ends}"
    if sp.enabled:
        return f"{head} kept (policy always) although it lowers goodput: {trade}{ends}"
    return f"{head} left off: it would lower goodput ({trade}){ends}"


def plan_with_speculation(req: PlanRequest, plan_fn: PlanFn) -> Plan:
    sp_req = req.speculative
    assert sp_req is not None
    check_request(sp_req, req.arch)
    spec = plan_fn(req)
    sp = spec.speculative
    assert sp is not None
    # The same layout without the proposer: the comparison the policy decides on.
    same = replace(
        req,
        speculative=None,
        tensor_parallel_size=spec.tensor_parallel_size,
        pipeline_parallel_size=spec.pipeline_parallel_size,
        pipeline_auto=False,
    )
    bare = plan_fn(same)
    sp = replace(
        sp,
        goodput_with=spec.predicted.goodput_requests_per_second,
        goodput_without=bare.predicted.goodput_requests_per_second,
        tpot_with_ms=spec.predicted.tpot_ms,
        tpot_without_ms=bare.predicted.tpot_ms,
        kv_tokens_without=bare.kv_cache_tokens,
    )
    # Equal goodput (both 0 where the SLO is out of reach): the TPOT decides.
    lowers = sp.goodput_with < sp.goodput_without or (
        sp.goodput_with == sp.goodput_without and sp.tpot_with_ms > sp.tpot_without_ms
    )
    if lowers and sp_req.policy == "auto":
        sp = replace(sp, enabled=False)
        chosen = plan_fn(replace(req, speculative=None))
        warning = (
            f"speculative decoding ({sp.method}) is not rendered: at {_workload(req)} it would "
            f"lower goodput from {sp.goodput_without:.2f} to {sp.goodput_with:.2f} req/s per "
            "replica; set policy always to run it anyway, or measure the acceptance rate"
        )
        return replace(
            chosen,
            speculative=sp,
            reason=f"{chosen.reason}; {summary(sp, req)}",
            warnings=(*chosen.warnings, warning),
        )
    warnings = spec.warnings
    if lowers:
        warnings = (
            *warnings,
            f"speculative decoding ({sp.method}) lowers goodput from {sp.goodput_without:.2f} "
            f"to {sp.goodput_with:.2f} req/s per replica at {_workload(req)} (policy always)",
        )
    return replace(
        spec, speculative=sp, reason=f"{spec.reason}; {summary(sp, req)}", warnings=warnings
    )
