"""The feed-forward at the speculative acceptance the engines observe: the engines' own
acceptance metrics (PromQL), the rate they give in place of the prior, and the plan at it
on the running layout (more capacity at a higher acceptance)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.support.kept_plan import kept_plan
from tokenfleet.api import parse_llmservice
from tokenfleet.autoscale.signals import acceptance_query
from tokenfleet.capacity.speculative import PRIORS
from tokenfleet.controller.spec_feed import (
    SpecFeed,
    fed_acceptance,
    plan_at,
    speculative_tokens,
)
from tokenfleet.engines import engine_info
from tokenfleet.localfleet.demo import load_llmservice

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "llama-3.1-8b-l4-autoscale.yaml"
KEY = ("default", "svc")
EAGLE3 = {"method": "eagle3", "model": "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B",
          "num_speculative_tokens": 3}  # fmt: skip


def _body(**engine: Any) -> dict[str, Any]:
    body = load_llmservice(EXAMPLE)
    body["metadata"].update({"uid": "u1", "generation": 1})
    body["spec"].setdefault("engine", {}).update(
        {"speculative": EAGLE3, "speculativePolicy": "always", **engine}
    )
    return body


def test_the_engines_own_acceptance_series_are_queried() -> None:
    sel = '{namespace="ns",llmservice="svc"}'
    vllm = acceptance_query(engine_info("vllm").metrics, sel, 120)
    assert vllm == (
        f"1 + sum(rate(vllm:spec_decode_num_accepted_tokens_total{sel}[120s])) / "
        f"sum(rate(vllm:spec_decode_num_drafts_total{sel}[120s]))"
    )
    sglang = acceptance_query(engine_info("sglang").metrics, sel, 120)
    assert sglang == f"avg(avg_over_time(sglang:spec_accept_length{sel}[120s]) > 0)"


@pytest.mark.parametrize(
    ("configured", "observed", "k", "want"),
    [
        (None, 2.60, 3, 0.7),  # vLLM's EAGLE-3 baseline length: its prior's rate, stepped
        (None, 1.0, 3, 0.0),  # nothing accepted
        (0.9, 2.60, 3, None),  # a configured rate is the user's word
        (None, None, 3, None),  # no speculation reported
        (None, 2.0, 0, None),  # no speculative settings
    ],
)
def test_observed_length_becomes_the_rate_to_plan_at(
    configured: float | None, observed: float | None, k: int, want: float | None
) -> None:
    assert fed_acceptance(configured, observed, k) == want


def test_the_prior_reads_back_from_its_own_length() -> None:
    prior = PRIORS["eagle3"]
    assert fed_acceptance(None, prior.acceptance_length, prior.tokens) == pytest.approx(
        round(prior.rate / 0.05) * 0.05
    )


async def test_a_higher_observed_acceptance_plans_more_capacity() -> None:
    body = _body()
    assert speculative_tokens(parse_llmservice(body).spec) == 3
    kept = kept_plan(body)
    assert kept.plan.speculative is not None
    low, high = plan_at(kept.plan, 0.3, None), plan_at(kept.plan, 0.9, None)
    assert low is not None and high is not None and high > low
    feed = SpecFeed()
    got = await feed.predicted(KEY, kept, 0.9, None)
    assert got == high
    assert await feed.predicted(KEY, kept, 0.9, None) == high  # kept


def test_no_speculation_plans_nothing_here() -> None:
    body = load_llmservice(EXAMPLE)
    body["metadata"].update({"uid": "u1", "generation": 1})
    assert speculative_tokens(parse_llmservice(body).spec) == 0
    assert plan_at(kept_plan(body).plan, 0.9, None) is None
