"""The engines' observed prefix-cache hit rate: the PromQL per engine (names from the
installed engines' metric code) and when the feed-forward uses it. Pure."""

from __future__ import annotations

import pytest

from tokenfleet.autoscale.signals import prefix_hit_rate_query
from tokenfleet.controller.prefix_feed import MAX_HIT_RATE, fed_hit_rate
from tokenfleet.engines import engine_info
from tokenfleet.engines.types import MetricNames

SEL = '{namespace="team-a",llmservice="chat"}'


def test_vllm_hit_rate_is_hits_over_queries_of_prompt_tokens_over_the_window() -> None:
    assert prefix_hit_rate_query(engine_info("vllm").metrics, SEL, 60) == (
        f"sum(rate(vllm:prefix_cache_hits_total{SEL}[60s])) / "
        f"sum(rate(vllm:prefix_cache_queries_total{SEL}[60s]))"
    )


def test_sglang_hit_rate_is_its_gauge_averaged_over_the_window() -> None:
    assert prefix_hit_rate_query(engine_info("sglang").metrics, SEL, 60) == (
        f"avg(avg_over_time(sglang:cache_hit_rate{SEL}[60s]))"
    )


def test_an_engine_without_prefix_metrics_is_not_asked() -> None:
    bare = MetricNames(
        ttft="t", itl=("i",), e2e="e", queue_time="q", running="r", waiting="w",
        kv_usage=("k",), request_success="s", prompt_tokens="p", generation_tokens="g",
        request_tpot=None, ttft_buckets=(1.0,), itl_buckets=(1.0,),
    )  # fmt: skip
    assert prefix_hit_rate_query(bare, SEL, 60) is None


@pytest.mark.parametrize(
    ("configured", "observed", "fed"),
    [
        (0.0, None, None),  # no observation (zero load: 0/0)
        (0.0, 0.0, None),  # nothing cached: the spec's plan
        (0.0, 0.01, None),  # rounds to 0
        (0.0, 0.52, 0.5),  # rounded to a step: noise does not re-plan
        (0.0, 0.58, 0.6),
        (0.0, 1.0, MAX_HIT_RATE),  # the API's bound
        (0.3, 0.8, None),  # configured: the user's word wins
    ],
)
def test_fed_hit_rate(configured: float, observed: float | None, fed: float | None) -> None:
    assert fed_hit_rate(configured, observed) == fed
