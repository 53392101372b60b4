"""The feed-forward at the observed prefix-cache hit rate: the reconciler's kept plan with
its layout pinned, more capacity at a higher hit rate, evaluated once per plan generation
and hit-rate step."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.support.kept_plan import kept_plan
from tokenfleet.api import parse_llmservice, plan_service, to_plan_request
from tokenfleet.controller import prefix_feed
from tokenfleet.controller.prefix_feed import PrefixFeed
from tokenfleet.localfleet.demo import load_llmservice

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "llama-3.1-8b-l4-autoscale.yaml"
KEY = ("default", "svc")


def _body(generation: int = 1) -> dict[str, Any]:
    body = load_llmservice(EXAMPLE)
    body["metadata"].update({"uid": "u1", "generation": generation})
    # Prefill-heavy, so the hit rate shows in the plan.
    body["spec"].setdefault("workload", {}).update({"inputTokens": 3000, "outputTokens": 64})
    return body


async def test_higher_observed_hit_rate_plans_more_capacity_once_per_step(
    monkeypatch: Any,
) -> None:
    body = _body()
    service = parse_llmservice(body)
    spec_plan = plan_service(to_plan_request(service)).predicted.goodput_requests_per_second
    plans: list[float] = []
    real = prefix_feed._plan_at
    monkeypatch.setattr(
        prefix_feed,
        "_plan_at",
        lambda s, h: plans.append(h) or real(s, h),  # type: ignore[func-returns-value]
    )
    feed = PrefixFeed()
    half = await feed.predicted(KEY, kept_plan(body), 0.5)
    assert half is not None and half > spec_plan
    assert await feed.predicted(KEY, kept_plan(body), 0.5) == half  # kept
    more = await feed.predicted(KEY, kept_plan(body), 0.8)
    assert more is not None and more > half
    newer = _body(generation=2)
    await feed.predicted(KEY, kept_plan(newer), 0.8)  # a spec edit re-plans
    assert plans == [0.5, 0.8, 0.8]
    feed.forget(KEY)
    await feed.predicted(KEY, kept_plan(newer), 0.8)
    assert len(plans) == 4
