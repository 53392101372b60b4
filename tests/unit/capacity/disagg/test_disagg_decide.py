"""Aggregated or disaggregated: the cheaper per good request wins (by more than the goodput
searches resolve, MARGIN), and the why line says so.

The cases hold one workload where the model finds disaggregation cheaper (Llama-3.1-70B FP8,
3,000 / 150 tokens on H100: prefill-heavy, where Dynamo measured +30% throughput per GPU)
and one where it does not (Llama-3.1-8B at 200 / 200 tokens), so the rule can fail both ways.
"""

from __future__ import annotations

import math
from dataclasses import replace

import pytest

from tokenfleet.capacity import PlanError, PlanRequest, get_gpu, load_model, plan
from tokenfleet.capacity.cost_choice import cost_per_million_good
from tokenfleet.capacity.disagg.decide import MARGIN
from tokenfleet.capacity.disagg.request import ServingRequest

PREFILL_HEAVY = PlanRequest(
    arch=load_model("meta-llama/Llama-3.1-70B"),
    gpu=get_gpu("h100-sxm"),
    quantization="fp8",
    input_tokens=3000,
    output_tokens=150,
    ttft_slo_ms=2000,
)
SHORT = PlanRequest(
    arch=load_model("meta-llama/Llama-3.1-8B"),
    gpu=get_gpu("h100-sxm"),
    input_tokens=200,
    output_tokens=200,
)
AUTO = ServingRequest(mode="auto")


@pytest.mark.parametrize("req", [PREFILL_HEAVY, SHORT], ids=["70b-3000-150", "8b-200-200"])
def test_disaggregation_never_chosen_where_it_costs_more(req: PlanRequest) -> None:
    p = plan(replace(req, serving=AUTO))
    s = p.serving
    assert s is not None and s.disaggregated is not None
    aggregated = cost_per_million_good(plan(req))
    assert s.aggregated_cost == pytest.approx(aggregated)
    pd = s.disaggregated.cost_per_million_good_requests
    if s.mode == "disaggregated":
        assert pd < aggregated * (1 - MARGIN)
        assert p.serving.roles is not None  # type: ignore[union-attr]
    else:
        assert pd >= aggregated * (1 - MARGIN)
        assert p.serving.roles is None  # type: ignore[union-attr]


def test_the_two_cases_fall_on_opposite_sides() -> None:
    heavy = plan(replace(PREFILL_HEAVY, serving=AUTO)).serving
    short = plan(replace(SHORT, serving=AUTO)).serving
    assert heavy is not None and short is not None
    assert (heavy.mode, short.mode) == ("disaggregated", "aggregated")
    assert heavy.why.startswith("disaggregated at 3000/150 tokens")
    assert short.why.startswith("aggregated at 200/200 tokens")
    for s in (heavy, short):  # what won, by how much, the transfer, what would flip it
        assert "%)" in s.why and "KV transfer" in s.why and "prefill interference" in s.why
        assert "prompt" in s.flip and s.flip in s.why


def test_disaggregated_plan_is_the_decode_role_with_both_roles() -> None:
    p = plan(replace(PREFILL_HEAVY, serving=ServingRequest(mode="disaggregated")))
    s = p.serving
    assert s is not None and s.roles is not None
    pre, dec = s.roles
    assert (pre.name, dec.name) == ("prefill", "decode")
    assert p.tensor_parallel_size == dec.plan.tensor_parallel_size
    d = s.disaggregated
    assert d is not None
    # TTFT = prefill + transfer + decode landing, each at its goodput.
    assert d.ttft_p95_ms == pytest.approx(pre.ttft_p95_ms + d.transfer_ms + dec.ttft_p95_ms)
    assert d.ttft_p95_ms <= PREFILL_HEAVY.ttft_slo_ms
    assert pre.ttft_budget_ms + d.transfer_ms + dec.ttft_budget_ms == pytest.approx(2000)
    assert p.as_dict()["serving"]["mode"] == "disaggregated"


def test_asked_for_disaggregation_says_what_it_costs() -> None:
    p = plan(replace(SHORT, serving=ServingRequest(mode="disaggregated")))
    s = p.serving
    assert s is not None and s.mode == "disaggregated"
    assert "(asked for)" in s.why and "against aggregated" in s.why


def test_target_rps_sizes_both_kinds_of_fleet() -> None:
    p = plan(replace(PREFILL_HEAVY, serving=AUTO, target_requests_per_second=20))
    s = p.serving
    assert s is not None and s.aggregated_fleet is not None
    d = s.disaggregated
    assert d is not None and d.fleet is not None
    f = d.fleet
    assert f.prefill_replicas >= math.ceil(20 / d.prefill.goodput_requests_per_second - 1e-9)
    assert f.decode_replicas >= math.ceil(20 / d.decode.goodput_requests_per_second - 1e-9)
    aggregated = s.aggregated_fleet.chosen.cost_per_hour
    if s.mode == "disaggregated":
        assert f.cost_per_hour < aggregated
    else:
        assert f.cost_per_hour >= aggregated * (1 - MARGIN)


def test_no_prefill_time_left_is_refused_with_the_reason() -> None:
    """A TTFT SLO the transfer and the decode landing already spend."""
    req = replace(SHORT, ttft_slo_ms=60, tpot_slo_ms=50, serving=ServingRequest(
        mode="disaggregated", network_gbit=1.0))  # fmt: skip
    with pytest.raises(PlanError) as e:
        plan(req)
    assert e.value.field == "serving" and "leave no prefill time" in e.value.problem
