"""The roles under load: a decode replica never runs a prefill chunk, a prefill replica runs
requests to their first token, and a role's capacity is held to its share of the SLO."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest

from tokenfleet.capacity import PlanRequest, get_gpu, load_model, plan, step_model
from tokenfleet.capacity.disagg import roles as r
from tokenfleet.capacity.disagg.sizing import decode_capacity, decode_only_tpot, prefill_capacity

REQ = PlanRequest(
    arch=load_model("meta-llama/Llama-3.1-8B"),
    gpu=get_gpu("h100-sxm"),
    tensor_parallel_size=1,
    input_tokens=4000,
    output_tokens=200,
)


@pytest.fixture(scope="module")
def p8b() -> object:
    return plan(REQ)


def test_decode_timer_charges_a_landing_as_one_decoding_sequence(p8b: object) -> None:
    step = step_model(p8b)  # type: ignore[arg-type]
    timer = r.DecodeTimer(step, 4000)
    # Two landing requests beside 10 decoding ones = 12 decoding sequences over their context.
    assert timer.step_seconds(8000, 10, 50_000) == step.step_seconds(0, 12, 58_000)
    # A prefill chunk of the same tokens costs far more on the aggregated step.
    assert step.step_seconds(8000, 10, 50_000) > 3 * timer.step_seconds(8000, 10, 50_000)


def test_decode_tpot_under_pd_has_no_prefill_interference(p8b: object) -> None:
    """At the aggregated replica's goodput rate, the same layout as a decode replica decodes
    with no step longer than a pure decode step of its fullest batch; the aggregated replica's
    median TPOT, which carries prefill chunks, is higher."""
    p = p8b
    rate = p.predicted.goodput_requests_per_second  # type: ignore[attr-defined]
    assert rate > 0
    alone = decode_only_tpot(p, 4000, 200, rate)  # type: ignore[arg-type]
    step = step_model(p)  # type: ignore[arg-type]
    seats = p.max_num_seqs  # type: ignore[attr-defined]
    longest_decode = step.step_seconds(0, seats, seats * 4200)
    assert 0 < alone <= longest_decode
    assert alone < p.predicted.goodput_tpot_ms / 1e3  # type: ignore[attr-defined]


def test_prefill_role_runs_to_the_first_token(p8b: object) -> None:
    prefill_plan = plan(replace(REQ, output_tokens=1))
    c = prefill_capacity(prefill_plan, 4000, 0.4)
    assert c.goodput > 0
    assert c.ttft_p95_s <= 0.4  # within its share at its capacity
    assert c.tpot_p50_s == 0.0  # it decodes nothing
    assert c.goodput <= c.saturation


def test_role_capacity_is_held_to_the_union_bound(p8b: object) -> None:
    assert pytest.approx(0.975) == r.ROLE_ATTAINMENT
    c = decode_capacity(p8b, 4000, 200, 0.05)  # type: ignore[arg-type]
    assert 0 < c.goodput <= c.saturation
    assert c.tpot_p50_s <= 0.05
    # A share no lone request meets gives no capacity, not a guess.
    none = prefill_capacity(plan(replace(REQ, output_tokens=1)), 4000, 0.001)
    assert none.goodput == 0 and math.isinf(none.ttft_p95_s)


def test_capacity_search_brackets_the_passing_rate() -> None:
    """The search's own arithmetic on a run that passes below a known rate."""
    calls: list[float] = []

    def run(rate: float) -> object:
        calls.append(rate)
        return _Stats(attainment=1.0 if rate <= 7.3 else 0.5)

    rate, best = r.capacity(run, True, 10.0)  # type: ignore[arg-type]
    assert 7.3 * (1 - r.RESOLUTION) <= rate <= 7.3 and best is not None
    assert len(calls) <= 1 + r.HALVINGS + r.BISECTIONS
    assert r.capacity(run, False, 10.0) == (0.0, None)  # type: ignore[arg-type]


class _Stats:
    def __init__(self, attainment: float) -> None:
        self.attainment = attainment
        self.saturated = False
