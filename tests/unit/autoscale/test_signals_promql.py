"""The PromQL builders and the attainment arithmetic of autoscale/signals.py. Pure.

The queries themselves are run against a real Prometheus in tests/system/test_signals_sim.py;
here the strings are pinned (a reviewer reads exactly what the autoscaler asks) and the
boundary / bound arithmetic is checked case by case.
"""

from __future__ import annotations

import math

import pytest

from tokenfleet.autoscale.prometheus import Sample
from tokenfleet.autoscale.signals import (
    Boundary,
    SignalsQuery,
    attainment_query,
    bucket_bounds_query,
    clamp01,
    finite,
    goodput_bounds,
    newest_sample_age_query,
    per_pod_query,
    per_replica_query,
    pick_boundary,
    reporting_replicas_query,
    request_rate_query,
    selector,
    tpot_families,
    ttft_quantile_query,
)
from tokenfleet.engines import engine_info

VLLM = engine_info("vllm").metrics
SGLANG = engine_info("sglang").metrics
SEL = '{namespace="team-a",llmservice="chat"}'


def test_selector_scopes_by_the_podmonitor_labels_and_escapes() -> None:
    assert selector("team-a", "chat") == SEL
    assert selector("ns", 'a"b\\c') == '{namespace="ns",llmservice="a\\"b\\\\c"}'
    assert selector("ns", "x", pod="x-0") == '{namespace="ns",llmservice="x",pod="x-0"}'


@pytest.mark.parametrize(
    ("built", "expected"),
    [
        (
            reporting_replicas_query(VLLM, SEL),
            f"count(count by (pod) (vllm:num_requests_running{SEL}))",
        ),
        (
            newest_sample_age_query(SGLANG, SEL),
            f"time() - max(timestamp(sglang:num_running_reqs{SEL}))",
        ),
        (
            request_rate_query(VLLM, SEL, 60),
            f"sum(rate(vllm:request_success_total{SEL}[60s]))",
        ),
        (
            request_rate_query(SGLANG, SEL, 12.5),
            f"sum(rate(sglang:num_requests_total{SEL}[13s]))",
        ),
        (
            # Both vLLM KV names (renamed in 0.11): whichever a pod exports.
            per_replica_query(VLLM.kv_usage, SEL),
            f"avg(max by (pod) ((vllm:kv_cache_usage_perc{SEL} or "
            f"vllm:gpu_cache_usage_perc{SEL})))",
        ),
        (
            per_replica_query([SGLANG.waiting], SEL),
            f"avg(max by (pod) (sglang:num_queue_reqs{SEL}))",
        ),
        (per_pod_query([VLLM.running], SEL), f"max by (pod) (vllm:num_requests_running{SEL})"),
        (
            ttft_quantile_query(VLLM, SEL, 0.95, 60),
            "histogram_quantile(0.95, sum by (le) "
            f"(rate(vllm:time_to_first_token_seconds_bucket{SEL}[60s])))",
        ),
        (
            attainment_query("sglang:time_to_first_token_seconds", "0.4", SEL, 30),
            'sum(rate(sglang:time_to_first_token_seconds_bucket{namespace="team-a",'
            'llmservice="chat",le="0.4"}[30s])) / '
            f"sum(rate(sglang:time_to_first_token_seconds_count{SEL}[30s]))",
        ),
        (
            bucket_bounds_query(["vllm:time_to_first_token_seconds", "vllm:x"], SEL),
            'count by (__name__, le) ({__name__=~"vllm:time_to_first_token_seconds_bucket|'
            'vllm:x_bucket", namespace="team-a",llmservice="chat"})',
        ),
    ],
)
def test_promql_strings(built: str, expected: str) -> None:
    assert built == expected


@pytest.mark.parametrize(
    ("names", "expected"),
    [
        (
            VLLM,
            (
                ("vllm:request_time_per_output_token_seconds", "request"),
                ("vllm:inter_token_latency_seconds", "token"),
                ("vllm:time_per_output_token_seconds", "token"),  # before 0.11
            ),
        ),
        (
            SGLANG,
            (
                ("sglang:request_time_per_output_token_seconds", "request"),
                ("sglang:inter_token_latency_seconds", "token"),
            ),
        ),
    ],
)
def test_tpot_prefers_the_per_request_histogram(names: object, expected: object) -> None:
    assert tpot_families(names) == expected  # type: ignore[arg-type]


VLLM_LES = ["0.001", "0.005", "0.01", "0.02", "0.04", "0.06", "0.08", "0.1", "0.25", "0.5",
            "0.75", "1.0", "2.5", "+Inf"]  # fmt: skip


@pytest.mark.parametrize(
    ("slo", "les", "expected"),
    [
        (0.5, VLLM_LES, Boundary("0.5", 0.5, "exact")),
        (1.0, VLLM_LES, Boundary("1.0", 1.0, "exact")),  # "1.0" as Python clients print it
        (1.0, ["0.5", "1", "+Inf"], Boundary("1", 1.0, "exact")),  # "1" as Go prints it
        (0.3, VLLM_LES, Boundary("0.25", 0.25, "down")),  # between edges: the one below
        (0.0999, VLLM_LES, Boundary("0.08", 0.08, "down")),
        (5000.0, VLLM_LES, Boundary("2.5", 2.5, "down")),  # +Inf is never a boundary
        (0.05, ["0.1", "0.2", "+Inf"], Boundary(None, None, "unmeasurable")),  # below all
        (0.5, [], Boundary(None, None, "unmeasurable")),
        (0.5, ["junk", "0.4"], Boundary("0.4", 0.4, "down")),
    ],
)
def test_pick_boundary(slo: float, les: list[str], expected: Boundary) -> None:
    assert pick_boundary(slo, les) == expected


@pytest.mark.parametrize(
    ("a", "b", "rate", "expected"),
    [
        (1.0, 1.0, 10.0, (10.0, 10.0)),
        (0.9, 0.8, 10.0, (7.0, 8.0)),  # [a+b-1, min(a,b)] x rate
        (0.4, 0.5, 10.0, (0.0, 4.0)),  # the lower bound never goes negative
        (0.0, 1.0, 5.0, (0.0, 0.0)),
        (None, 1.0, 5.0, None),  # no TTFT data: no bound
        (1.0, None, 5.0, None),
        (1.0, 1.0, None, None),
    ],
)
def test_goodput_joint_bounds(
    a: float | None, b: float | None, rate: float | None, expected: object
) -> None:
    bounds = goodput_bounds(a, b, rate)
    if expected is None:
        assert bounds is None
    else:
        assert bounds == pytest.approx(expected)


@pytest.mark.parametrize(
    ("values", "expected"),
    [
        ([], None),  # no series
        ([math.nan], None),  # 0/0 at zero load
        ([math.inf], None),
        ([0.0], 0.0),  # a real zero stays zero
        ([1.0, 2.0], None),  # ambiguous: not one value
        ([0.7], 0.7),
    ],
)
def test_finite_tells_no_data_from_zero(values: list[float], expected: float | None) -> None:
    assert finite([Sample({}, v, 0.0) for v in values]) == expected


def test_clamp01_absorbs_rate_extrapolation() -> None:
    assert clamp01(1.0000001) == 1.0
    assert clamp01(-0.0) == 0.0
    assert clamp01(None) is None


def test_query_names_follow_the_engine() -> None:
    query = SignalsQuery("sglang", "ns", "x", 0.5, 0.05, 0.95)
    assert query.names.ttft == "sglang:time_to_first_token_seconds"
    with pytest.raises(Exception, match="unknown engine"):
        _ = SignalsQuery("tgi", "ns", "x", 0.5, 0.05, 0.95).names
