"""cost_choice's pruned search picks exactly what planning every shortlisted layout in full
picks: the same Plan, reason (runner-up and its cost) included, with fewer goodput runs.

The pruning stops a layout's goodput search once its bracket top shows it would cost more
than the two cheapest priced so far (load.goodput_capacity's floor_rps); the order it plans
the layouts in (cheapest at the closed-loop saturation throughput first) must not matter.
"""

from __future__ import annotations

import dataclasses

import pytest

from tokenfleet.capacity import PlanError, PlanRequest, get_gpu, load, load_model, plan, planner
from tokenfleet.capacity.cost_choice import choose
from tokenfleet.capacity.types import Plan

CASES = [
    ("meta-llama/Llama-3.1-8B", "l4", {}),
    ("meta-llama/Llama-3.1-8B", "h100-sxm", {}),
    ("openai/gpt-oss-120b", "h100-sxm", {}),
    ("deepseek-ai/DeepSeek-V3", "h200", {}),
    ("meta-llama/Llama-3.1-8B", "l4", {"ttft_slo_ms": 2000, "tpot_slo_ms": 100}),
    ("Qwen/Qwen3-32B", "h100-sxm", {"input_tokens": 4000, "output_tokens": 1000}),
    ("meta-llama/Llama-3.1-8B", "h100-sxm", {"engine": "sglang", "prefix_cache_hit_rate": 0.5}),
]


def _choose(req: PlanRequest, pruned: bool) -> tuple[Plan | None, int]:
    """The choice, and the open-loop runs it took from cold caches."""
    load.clear_caches()
    ctx = planner._context(req)
    layouts = planner._candidates(req, ctx.per_node)
    chosen = choose(
        req,
        layouts,
        ctx.per_node,
        plan,
        lambda lay: planner._estimated_cost(ctx, lay),
        planner._plan if pruned else None,
        planner._saturation_cost if pruned else None,
    )
    return chosen, load.open_.cache_info().misses


def test_a_free_gpu_prunes_nothing_and_still_plans() -> None:
    """Price 0 (an on-prem GPU priced at nothing): every cost is 0, the floor must not
    divide by it; equal costs go to fewer GPUs."""
    gpu = get_gpu("h100-sxm").with_price(0.0)
    req = PlanRequest(arch=load_model("meta-llama/Llama-3.1-8B"), gpu=gpu)
    full, _ = _choose(req, pruned=False)
    fast, _ = _choose(req, pruned=True)
    assert fast == full and fast is not None and fast.tensor_parallel_size == 1


@pytest.mark.parametrize(("model", "gpu", "kw"), CASES)
def test_pruned_choice_is_the_full_choice(model: str, gpu: str, kw: dict[str, object]) -> None:
    req = PlanRequest(arch=load_model(model), gpu=get_gpu(gpu), **kw)  # type: ignore[arg-type]
    full, full_runs = _choose(req, pruned=False)
    fast, fast_runs = _choose(req, pruned=True)
    assert fast == full
    assert fast_runs <= full_runs
    assert plan(req) == full


def test_pruning_skips_goodput_runs() -> None:
    """8B on H100: TP 4 and TP 8 cannot beat TP 1 and TP 2; their searches stop early."""
    req = PlanRequest(arch=load_model("meta-llama/Llama-3.1-8B"), gpu=get_gpu("h100-sxm"))
    _, full_runs = _choose(req, pruned=False)
    _, fast_runs = _choose(req, pruned=True)
    assert fast_runs < full_runs


def test_layouts_whose_first_goodput_run_passes_are_planned_first() -> None:
    """gpt-oss-120b on A100-80GB: TP 2's first goodput run fails, TP 4's passes. Planned
    after TP 4, TP 2 is searched only down to the floor TP 4's cost sets; ordered by
    saturation cost alone, it came first and was searched in full. Same choice either way."""
    req = PlanRequest(arch=load_model("openai/gpt-oss-120b"), gpu=get_gpu("a100-80gb"))

    def by_saturation_only(sub: PlanRequest) -> tuple[bool, float]:
        return False, planner._saturation_cost(sub)[1]

    load.clear_caches()
    ctx = planner._context(req)
    layouts = planner._candidates(req, ctx.per_node)

    def estimate(lay: object) -> float:
        return planner._estimated_cost(ctx, lay)  # type: ignore[arg-type]

    old = choose(req, layouts, ctx.per_node, plan, estimate, planner._plan, by_saturation_only)
    old_runs = load.open_.cache_info().misses
    new, new_runs = _choose(req, pruned=True)
    assert new == old
    assert new_runs < old_runs


def test_a_passing_first_run_bounds_the_capacity_from_below() -> None:
    """What the order relies on: the capacity found is at least the first run's rate."""
    checked = 0
    for model, gpu, kw in CASES:
        req = PlanRequest(arch=load_model(model), gpu=get_gpu(gpu), **kw)  # type: ignore[arg-type]
        ctx = planner._context(req)
        for lay in planner._candidates(req, ctx.per_node):
            if lay.tp * lay.pp > ctx.per_node:
                continue
            sub = dataclasses.replace(
                req, tensor_parallel_size=lay.tp, pipeline_parallel_size=lay.pp
            )
            load.clear_caches()
            try:
                fails, _ = planner._saturation_cost(sub)
                p = plan(sub)
            except PlanError:
                continue
            if not fails:
                sub_ctx = planner._context(sub)
                s = planner._size(sub_ctx, planner._candidates(sub, sub_ctx.per_node))
                ttft, tpot = sub.ttft_slo_ms / 1e3, sub.tpot_slo_ms / 1e3
                start = load.search_start(
                    s.step, s.replica, sub.concurrency, s.prefill, sub.output_tokens,
                    s.slots, ttft, tpot,
                )  # fmt: skip
                first = load._first_rate(start.guess, start.saturation * 1.5)
                assert p.predicted.goodput_requests_per_second >= first
                checked += 1
    assert checked >= 5


@pytest.mark.parametrize(("model", "gpu", "kw"), CASES)
def test_layouts_are_planned_passing_first_then_by_saturation_cost(
    model: str, gpu: str, kw: dict[str, object]
) -> None:
    req = PlanRequest(arch=load_model(model), gpu=get_gpu(gpu), **kw)  # type: ignore[arg-type]
    load.clear_caches()
    ctx = planner._context(req)
    layouts = planner._candidates(req, ctx.per_node)
    keys: list[tuple[bool, float]] = []

    def order(sub: PlanRequest) -> tuple[bool, float]:
        return planner._saturation_cost(sub)

    def record(sub: PlanRequest, floor_rps: float = 0.0) -> Plan:
        keys.append(order(sub))  # cached: the same runs
        return planner._plan(sub, floor_rps)

    chosen = choose(
        req,
        layouts,
        ctx.per_node,
        record,
        lambda lay: planner._estimated_cost(ctx, lay),
        record,
        order,
    )
    assert chosen == plan(req)
    assert keys == sorted(keys)
    if model != "deepseek-ai/DeepSeek-V3":  # (one layout fits an H200 node)
        assert len(keys) >= 2
