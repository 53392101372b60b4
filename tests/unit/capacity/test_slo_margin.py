"""plan() says when the GPU barely meets the SLO (a lone request takes most of it, so the
replica keeps the SLO at a small share of its throughput), and a --target-rps fleet never
marks a row within the SLO whose run at the target misses it."""

from __future__ import annotations

import pytest

from tokenfleet.capacity import PlanRequest, get_gpu, load_model, plan
from tokenfleet.capacity.slo_margin import barely_met
from tokenfleet.capacity.types import Prediction
from tokenfleet.scheduling.virtual import LoadStats


def _plan(model: str, gpu: str, **kw):  # type: ignore[no-untyped-def]
    return plan(PlanRequest(arch=load_model(model), gpu=get_gpu(gpu), **kw))


def _barely(p) -> list[str]:  # type: ignore[no-untyped-def]
    return [w for w in p.warnings if w.startswith("the GPU barely meets the SLO")]


def test_70b_on_a100_at_the_default_slo_is_called_barely_met() -> None:
    p = _plan("meta-llama/Llama-3.1-70B-Instruct", "a100-80gb", target_requests_per_second=2)
    (warning,) = _barely(p)
    assert "of the 500 ms TTFT" in warning and "relax --ttft-slo-ms" in warning, warning
    share = p.predicted.goodput_requests_per_second / p.predicted.saturation_requests_per_second
    assert f"{share:.0%} of the" in warning


@pytest.mark.parametrize(
    ("model", "gpu", "kw"),
    [
        ("meta-llama/Llama-3.1-8B", "h100-sxm", {}),
        ("openai/gpt-oss-120b", "h100-sxm", {}),
        # The demo's service: a 1 s TTFT leaves an L4 most of its throughput.
        ("meta-llama/Llama-3.1-8B", "l4", {"ttft_slo_ms": 1000.0, "tpot_slo_ms": 100.0,
                                           "input_tokens": 1024, "output_tokens": 256}),
    ],
)  # fmt: skip
def test_a_slo_with_room_is_not_warned(model: str, gpu: str, kw: dict[str, float]) -> None:
    assert _barely(_plan(model, gpu, **kw)) == []


def _stats(ttft_s: float, tpot_s: float) -> LoadStats:
    return LoadStats(1, ttft_s, ttft_s, ttft_s, tpot_s, tpot_s, tpot_s, tpot_s, 1.0,
                     1.0, 1.0, 1.0, 1.0, False, 0)  # fmt: skip


def _prediction(goodput: float, saturation: float) -> Prediction:
    return Prediction(
        0.0, 0.0, 0.0, 0.0, goodput, 1, 0.0, saturation_requests_per_second=saturation
    )


@pytest.mark.parametrize(
    ("ttft_s", "tpot_s", "goodput", "warned"),
    [
        (0.30, 0.010, 0.2, "TTFT"),  # 60% of the TTFT, 10% of saturation
        (0.10, 0.040, 0.2, "TPOT"),  # 80% of the TPOT
        (0.30, 0.010, 0.6, None),  # 30% of saturation: the SLO costs less than 3/4
        (0.20, 0.020, 0.1, None),  # a low goodput, but a lone request has room
        (0.30, 0.010, 0.0, None),  # no goodput at all: plan() says so in its own words
    ],
)
def test_barely_met_needs_both_a_lone_request_near_the_slo_and_little_goodput(
    ttft_s: float, tpot_s: float, goodput: float, warned: str | None
) -> None:
    warning = barely_met(_stats(ttft_s, tpot_s), _prediction(goodput, 2.0), 500.0, 50.0)
    if warned is None:
        assert warning is None
    else:
        assert warning is not None and f"ms {warned} (" in warning, warning


def test_no_fleet_row_marked_within_the_slo_misses_it_at_the_target() -> None:
    """gpt-oss-120b on H100 at 20 req/s: one TP 2 replica (goodput 20.9 req/s) ran at 20
    req/s with a p95 TTFT of 551 ms against the 500 ms SLO, yet was the chosen row."""
    p = _plan("openai/gpt-oss-120b", "h100-sxm", target_requests_per_second=20)
    assert p.fleet is not None
    for row in (p.fleet.chosen, *p.fleet.alternatives):
        assert row.ttft_p95_ms <= 500.0, row
        assert row.tpot_ms <= 50.0, row
        assert row.replicas * row.goodput_requests_per_second >= 20
