"""The GPU type as a decision (capacity/gpu_choice.py): among the candidates, the type whose
best layout has the lowest GPU cost per good request, or the cheapest fleet at a target rate.

Each candidate is also planned here on its own (a plain plan() on that type), and the choice
must be the cheapest of those independent plans, the runner-up the second cheapest."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest

from tokenfleet.capacity import PlanError, PlanRequest, get_gpu, load_model, plan
from tokenfleet.capacity.cost_choice import cost_per_million_good
from tokenfleet.capacity.gpu_choice import GpuCandidate

FIVE = ("l4", "a10g", "l40s", "a100-80gb", "h100-sxm")


def _req(model: str, gpus: tuple[str, ...], **kw: object) -> PlanRequest:
    cands = tuple(GpuCandidate(get_gpu(g)) for g in gpus)
    return PlanRequest(  # type: ignore[arg-type]
        arch=load_model(model), gpu=cands[0].gpu, gpu_candidates=cands, **kw
    )


def _alone(req: PlanRequest, gpu: str) -> float:
    """The type's cost per good request when it is the only one (inf: it cannot serve)."""
    try:
        return cost_per_million_good(plan(replace(req, gpu=get_gpu(gpu), gpu_candidates=())))
    except PlanError:
        return math.inf


@pytest.mark.parametrize(
    ("model", "kw"),
    [
        ("meta-llama/Llama-3.1-8B", {"max_model_len": 8192}),
        ("meta-llama/Llama-3.1-8B", {"max_model_len": 8192, "ttft_slo_ms": 2000.0,
                                     "tpot_slo_ms": 100.0}),
        ("meta-llama/Llama-3.1-70B", {"max_model_len": 8192, "ttft_slo_ms": 2000.0,
                                      "tpot_slo_ms": 100.0}),
    ],
)  # fmt: skip
def test_the_choice_is_the_cheapest_per_good_request(model: str, kw: dict[str, object]) -> None:
    req = _req(model, FIVE, **kw)
    costs = {g: _alone(req, g) for g in FIVE}
    ranked = sorted((c, g) for g, c in costs.items() if c < math.inf)
    p = plan(req)
    assert p.choice is not None
    assert p.gpu.id == ranked[0][1] == p.choice.chosen.gpu.id
    assert p.choice.chosen.cost == pytest.approx(ranked[0][0])
    runner_up = p.choice.runner_up
    assert runner_up is not None and runner_up.gpu.id == ranked[1][1]
    # The reason names the choice and the runner-up with both costs.
    assert f"{ranked[0][1]} (" in p.reason and f"${ranked[0][0]:.2f} per 1M good" in p.reason
    assert f"runner-up {ranked[1][1]} (" in p.reason and f"${ranked[1][0]:.2f} per 1M" in p.reason
    # The chosen plan is that type's own plan: same layout as planning it alone.
    alone = plan(replace(req, gpu=p.gpu, gpu_candidates=()))
    assert p.tensor_parallel_size == alone.tensor_parallel_size
    assert p.request is not None and p.request.gpu_candidates == ()


def test_with_a_target_rate_the_cheapest_fleet_wins() -> None:
    req = _req("meta-llama/Llama-3.1-8B", ("l40s", "a100-80gb", "h100-sxm"),
               max_model_len=8192, target_requests_per_second=20.0)  # fmt: skip
    hourly = {}
    for g in ("l40s", "a100-80gb", "h100-sxm"):
        fleet = plan(replace(req, gpu=get_gpu(g), gpu_candidates=())).fleet
        assert fleet is not None
        hourly[g] = fleet.chosen.cost_per_hour
    p = plan(req)
    assert p.choice is not None and p.choice.ranking == "fleet"
    assert p.gpu.id == min(hourly, key=lambda g: hourly[g])
    assert [r.gpu.id for r in p.choice.usable] == sorted(hourly, key=lambda g: hourly[g])
    assert "the cheapest fleet for 20 req/s" in p.reason
    assert p.fleet is not None and p.fleet.chosen.cost_per_hour == hourly[p.gpu.id]


def test_a_max_count_too_small_for_the_fleet_leaves_the_type_out() -> None:
    cands = (GpuCandidate(get_gpu("h100-sxm"), max_count=1), GpuCandidate(get_gpu("l40s")))
    req = PlanRequest(arch=load_model("meta-llama/Llama-3.1-8B"), gpu=cands[0].gpu,
                      gpu_candidates=cands, max_model_len=8192,
                      target_requests_per_second=40.0)  # fmt: skip
    p = plan(req)
    assert p.choice is not None and p.gpu.id == "l40s"
    left = p.choice.ranked[-1]
    assert left.gpu.id == "h100-sxm" and not left.usable
    assert left.problem is not None and "more than its maxCount 1" in left.problem
    assert "h100-sxm left out: needs" in p.reason


def test_no_usable_candidate_is_one_error_naming_each_type() -> None:
    req = _req("meta-llama/Llama-3.1-70B", ("l4", "a10g"), max_model_len=8192)
    with pytest.raises(PlanError) as caught:
        plan(req)
    text = str(caught.value)
    assert text.startswith("gpu=l4,a10g: no candidate GPU type can serve")
    assert "l4: " in text and "a10g: " in text and "add a larger GPU type" in text


def test_equal_costs_go_to_fewer_gpus_then_to_the_order_given() -> None:
    # The same GPU at the same price twice under two names: a tie, kept in the given order.
    l40s = get_gpu("l40s")
    twin = replace(l40s, id="l40s-twin")
    req = PlanRequest(arch=load_model("meta-llama/Llama-3.1-8B"), gpu=twin, max_model_len=8192,
                      gpu_candidates=(GpuCandidate(twin), GpuCandidate(l40s)))  # fmt: skip
    p = plan(req)
    assert p.choice is not None
    assert [r.gpu.id for r in p.choice.usable] == ["l40s-twin", "l40s"]


def test_an_8b_model_plans_onto_a_3g_40gb_slice() -> None:
    gpu = get_gpu("h100-sxm-mig-3g.40gb")
    p = plan(PlanRequest(arch=load_model("meta-llama/Llama-3.1-8B"), gpu=gpu,
                         max_model_len=8192, ttft_slo_ms=1000.0))  # fmt: skip
    assert (p.tensor_parallel_size, p.pipeline_parallel_size, p.gpus_per_replica) == (1, 1, 1)
    assert p.memory.budget <= gpu.memory_gib * 1024**3
    assert p.predicted.goodput_requests_per_second > 0
    assert gpu.resource_name == "nvidia.com/mig-3g.40gb"


def test_a_mig_slice_refuses_tensor_parallelism() -> None:
    req = PlanRequest(arch=load_model("meta-llama/Llama-3.1-8B"),
                      gpu=get_gpu("a100-80gb-mig-3g.40gb"), tensor_parallel_size=2)  # fmt: skip
    with pytest.raises(PlanError) as caught:
        plan(req)
    assert str(caught.value).startswith("tp=2: a100-80gb-mig-3g.40gb is a MIG slice")
