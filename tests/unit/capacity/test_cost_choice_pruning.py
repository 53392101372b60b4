"""cost_choice's pruned search picks exactly what planning every shortlisted layout in full
picks: the same Plan, reason (runner-up and its cost) included, with fewer goodput runs.

The pruning stops a layout's goodput search once its bracket top shows it would cost more
than the two cheapest priced so far (load.goodput_capacity's floor_rps); the order it plans
the layouts in (cheapest at the closed-loop saturation throughput first) must not matter.
"""

from __future__ import annotations

import pytest

from tokenfleet.capacity import PlanRequest, get_gpu, load, load_model, plan, planner
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
