"""Layout choice by cost, honest 'why' lines, fixed TP, and fleet sizing from a target rate."""

from __future__ import annotations

import pytest

from tokenfleet.capacity import PlanError, PlanRequest, get_gpu, load_model, plan
from tokenfleet.capacity.fleet import option_for

L8, L70 = "meta-llama/Llama-3.1-8B", "meta-llama/Llama-3.1-70B"
SLO = {"ttft_slo_ms": 1000.0, "tpot_slo_ms": 100.0}


def _plan(model: str, gpu: str, **kw):
    return plan(PlanRequest(arch=load_model(model), gpu=get_gpu(gpu), **kw))


def test_8b_on_l4_off_slo_takes_tp1_and_says_replicas_serve_the_rest() -> None:
    # No layout of 8B on L4 meets a 10 ms TTFT: cost falls back to the fewest GPUs in total
    # (test_cost_choice.py has the cheapest-per-good-request rule).
    p = _plan(L8, "l4", ttft_slo_ms=10.0)
    assert (p.tensor_parallel_size, p.pipeline_parallel_size) == (1, 1)
    held = p.kv_cache_tokens // (2048 + 300)
    assert held < 16
    assert f"holds {held} of the 16 concurrent requests" in p.reason
    assert "1 more replica serves the rest" in p.reason
    # ... and names the wider alternative it did not take.
    assert "TP 2 x PP 1 would hold all 16" in p.reason


def test_min_gpus_objective_keeps_widening_tp_for_the_concurrency() -> None:
    p = _plan(L8, "l4", objective="min-gpus")
    assert p.tensor_parallel_size == 2 and "objective min-gpus" in p.reason


def test_max_model_len_is_named_when_it_decides() -> None:
    # 70B at 32K context does not start on 2 x H100: the length, not the concurrency, decides
    # (the fewest-GPUs rule cost falls back to when no layout meets the SLO).
    p = _plan(L70, "h100-sxm", max_model_len=32768, ttft_slo_ms=1.0)
    assert p.tensor_parallel_size == 4
    assert p.reason.split(": ", 1)[1].startswith("max-model-len 32,768")
    assert "TP 2 x PP 1" in p.reason


def test_a_fixed_tp_is_named_and_does_not_grow_pp() -> None:
    p = _plan(L8, "l4", tensor_parallel_size=1)
    assert p.pipeline_parallel_size == 1 and "fixed --tp 1" in p.reason
    with pytest.raises(PlanError) as err:
        _plan(L70, "l4", tensor_parallel_size=4)
    assert "--pp auto" in err.value.fix
    grown = _plan(L70, "l4", tensor_parallel_size=4, pipeline_auto=True)
    assert grown.tensor_parallel_size == 4 and grown.pipeline_parallel_size > 1


def test_latency_objective_spends_gpus_on_speed_and_says_so() -> None:
    cost = _plan(L70, "h100-sxm", objective="min-gpus")
    fast = _plan(L70, "h100-sxm", objective="latency")
    assert fast.gpus_per_replica > cost.gpus_per_replica
    assert "objective latency" in fast.reason
    assert fast.predicted.ttft_ms < cost.predicted.ttft_ms


def test_fleet_sizing_picks_the_cheapest_layout_and_explains() -> None:
    p = _plan(L8, "h100-sxm", target_requests_per_second=20, **SLO)
    assert p.fleet is not None
    chosen, others = p.fleet.chosen, p.fleet.alternatives
    assert others, "the alternatives must be shown"
    assert all(chosen.cost_per_hour <= o.cost_per_hour for o in others)
    assert chosen.goodput_requests_per_second * chosen.replicas >= 20
    assert (p.tensor_parallel_size, p.pipeline_parallel_size) == (
        chosen.tensor_parallel_size,
        chosen.pipeline_parallel_size,
    )
    assert "cheapest fleet for 20 req/s" in p.reason
    alt = others[0]
    assert f"next: {alt.replicas} x TP {alt.tensor_parallel_size}" in p.reason
    # Each alternative really needs its replica count: one fewer would miss the target.
    for o in (chosen, *others):
        assert (o.replicas - 1) * o.goodput_requests_per_second < 20
    doc = p.as_dict()["fleet"]
    keys = {
        "replicas",
        "gpusPerReplica",
        "totalGpus",
        "tensorParallelSize",
        "pipelineParallelSize",
        "goodputRequestsPerSecond",
        "costPerHour",
        "alternatives",
    }
    assert keys <= doc.keys() and all(
        keys - {"alternatives"} <= a.keys() for a in doc["alternatives"]
    )


def test_more_load_never_needs_fewer_gpus() -> None:
    totals = []
    for rate in (0.5, 1, 2, 3, 5, 8, 12, 17, 23, 30, 40, 55, 75):
        p = _plan(L8, "h100-sxm", target_requests_per_second=rate, **SLO)
        assert p.fleet is not None
        totals.append(p.fleet.chosen.total_gpus)
    assert totals == sorted(totals) and totals[-1] > totals[0]


def test_an_unreachable_slo_is_refused_with_the_fix() -> None:
    with pytest.raises(PlanError) as err:
        _plan(L8, "l4", target_requests_per_second=5, ttft_slo_ms=1, tpot_slo_ms=1)
    assert err.value.field == "target-rps" and "relax" in err.value.fix


def test_option_for_rounds_replicas_up() -> None:
    p = _plan(L8, "h100-sxm", **SLO)
    g = p.predicted.goodput_requests_per_second
    assert option_for(p, g).replicas == 1  # type: ignore[union-attr]
    assert option_for(p, g * 1.01).replicas == 2  # type: ignore[union-attr]


@pytest.mark.parametrize("objective", ["min-gpus", "latency"])
def test_a_fixed_layout_names_the_flags_under_every_objective(objective: str) -> None:
    p = _plan(L8, "h100-sxm", tensor_parallel_size=2, objective=objective)
    assert p.reason.endswith(": fixed --tp 2")
