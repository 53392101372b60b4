"""The SLO's attainable ceiling: idle prefill from the step model, the share of the mix under
it, the targets, and the policy's fixable reading of the signals."""

from __future__ import annotations

import pytest

from tests.support.step_timers import Roofline
from tokenfleet.api.spec import LLMServiceSpec
from tokenfleet.autoscale.attainability import (
    LengthHistogram,
    ceiling,
    idle_ttft,
    longest_prompt,
    targets,
)
from tokenfleet.autoscale.fixable import fixable_view
from tokenfleet.autoscale.prometheus import Sample
from tokenfleet.autoscale.signals import length_histogram, resolved_wait
from tokenfleet.autoscale.types import Signals

# 1 ms per 10 prompt tokens, 10 ms per decode step of the one sequence: easy arithmetic.
LINEAR = Roofline(overhead=0.0, per_prefill_token=1e-4, per_decode_seq=0.01)


def test_idle_prefill_and_the_longest_prompt_within_the_slo() -> None:
    timer = LINEAR
    assert idle_ttft(timer, 2048, 5000) == pytest.approx(0.5)  # chunked: 2048 + 2048 + 904
    assert longest_prompt(timer, 2048, 0.5) == 5000
    assert longest_prompt(timer, 2048, 0.00005) == 0  # not even one token
    assert longest_prompt(timer, 2048, 10.0, 4096) == 4096  # no prompt exceeds max-model-len


@pytest.mark.parametrize(
    ("slo", "attainable", "overall", "fixable"),
    [
        (0.99, 1.0, 0.99, 0.99),  # nothing unattainable: the SLO as written
        (0.99, 0.9986, 0.99, 0.99 / 0.9986),  # a small tail fits in the budget
        (0.99, 0.971, 0.966, 0.966 / 0.971),  # out of reach: ceiling less half the budget
        (0.9, 0.5, 0.45, 0.9),
    ],
)
def test_targets(slo: float, attainable: float, overall: float, fixable: float) -> None:
    got = targets(slo, attainable)
    assert got == pytest.approx((overall, fixable), abs=1e-9)


def test_histogram_share_and_quantile() -> None:
    # vLLM's 1-2-5 buckets stop at 5000 below max-model-len 8192: +Inf reads as ending there.
    h = LengthHistogram.of([100] * 90 + [3000] * 5 + [7000] * 5, (1000, 2000, 5000), 8192)
    assert h.share_at_most(2000) == pytest.approx(0.90)
    assert h.share_at_most(3500) == pytest.approx(0.925)  # linear inside (2000, 5000]
    assert h.share_at_most(5000 + 3192 / 2) == pytest.approx(0.975)
    assert h.share_at_most(9000) == 1.0
    assert LengthHistogram.of([7000], (1000,)).share_at_most(9000) == 0.0  # unbounded +Inf
    assert h.quantile(0.5) == pytest.approx(1000 * 50 / 90)
    assert LengthHistogram((), ()).quantile(0.5) is None


def test_ceiling_names_the_cause() -> None:
    h = LengthHistogram.of([1000] * 97 + [8000] * 3, (1000, 2000, 5000, 10000))
    c = ceiling(LINEAR, 2048, h, ttft_ms=500, slo_attainment=0.99, quantile=0.95)
    assert c.longest_prompt == 5000 and c.attainable == pytest.approx(0.97)
    assert c.limited and c.target == pytest.approx(0.965)
    # The p95 of the attainable 97%: rank 92.15 of 97 in (0, 1000] -> 950 tokens, 95 ms.
    assert c.wait_budget_seconds == pytest.approx(0.405)
    assert c.message().startswith(
        "3.0% of requests have prompts longer than 5,000 tokens, whose prefill alone exceeds "
        "ttftMs=500; the SLO can reach at most 97.0% attainment"
    )


def _spec() -> LLMServiceSpec:
    return LLMServiceSpec.model_validate(
        {"model": {"id": "meta-llama/Llama-3.1-8B"}, "gpu": {"type": "l40s"}}
    )


def test_the_policy_reads_only_what_replicas_fix() -> None:
    h = LengthHistogram.of([1000] * 97 + [8000] * 3, (1000, 2000, 5000, 10000))
    c = ceiling(LINEAR, 2048, h, ttft_ms=500, slo_attainment=0.99, quantile=0.95)
    s = Signals(
        at=0.0,
        reporting_replicas=2,
        ttft_quantile_seconds=0.49,  # the long prompts' own prefill
        ttft_attainment=0.965,
        queue_wait_quantile_seconds=0.1,
    )
    spec, seen = fixable_view(_spec(), s, c)
    assert spec.slo.attainment == pytest.approx(c.fixable_target)
    assert seen.ttft_attainment == pytest.approx(0.965 / 0.97)
    # 0.1 s of wait against 0.405 s of budget reads as a TTFT at a quarter of the SLO.
    assert seen.ttft_quantile_seconds == pytest.approx(0.5 * 0.1 / 0.405)
    assert fixable_view(_spec(), s, None) == (_spec(), s)
    no_wait = fixable_view(_spec(), Signals(at=0.0, reporting_replicas=1), c)[1]
    assert no_wait.ttft_quantile_seconds is None


def test_prometheus_length_histogram_and_wait_resolution() -> None:
    samples = [
        Sample({"le": "1000"}, 90.0, 0.0),
        Sample({"le": "+Inf"}, 100.0, 0.0),
        Sample({"le": "5000"}, 95.0, 0.0),
        Sample({"le": "2000"}, 89.9, 0.0),  # rate() extrapolation: never a negative bucket
    ]
    h = length_histogram(samples)
    assert h is not None and h.bounds == (1000.0, 2000.0, 5000.0)
    assert h.counts == pytest.approx((90.0, 0.0, 5.0, 5.0))
    assert length_histogram([Sample({"le": "+Inf"}, 0.0, 0.0)]) is None
    assert resolved_wait(0.29, ["0.3", "0.5", "+Inf"]) == 0.0  # inside vLLM's first bucket
    assert resolved_wait(0.7, ["0.3", "0.5", "+Inf"]) == 0.7
    assert resolved_wait(None, ["0.3"]) is None
