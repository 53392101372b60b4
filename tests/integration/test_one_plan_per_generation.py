"""One plan per LLMService generation, in the running operator (issue 31): the spec is
planned once per generation, however many reconcile passes (drift, resync) and autoscaler
ticks follow, and the autoscaler's ceiling, mix and prefix feed use that plan.

Counted: the reconciler's pipeline step (the planner), and every conversion of a spec
into a plan request (api.to_plan_request, wherever it is imported from: planning an
LLMService starts there). The autoscaler's signals (with a prompt-length histogram, an
output mean and a prefix-cache hit rate, so the ceiling, the mix and the prefix feed all
run) are injected.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from tests.support.autoscaler_stubs import NAME, URL, Source, StubPolicy, autoscaled, status
from tests.support.cluster_objects import LLMS_PATH, SERVICES, create, patch
from tests.support.operator_harness import NAMESPACE, StartOperator, eventually
from tokenfleet.autoscale.attainability import LengthHistogram
from tokenfleet.autoscale.signals import Attainment, Boundary, Observation, SignalsQuery
from tokenfleet.autoscale.types import Signals
from tokenfleet.controller.reconcile import Pipeline
from tokenfleet.testing.kmock_cluster import Cluster

PROMPTS = LengthHistogram((500.0, 1000.0, 2000.0), (80.0, 20.0, 0.0, 0.0))


class MixSource(Source):
    """Signals with the traffic's mix and the engines' prefix-cache hit rate."""

    async def signals(self, query: SignalsQuery, url: str, at: float) -> Observation:
        self.queries.append((query, url))
        nothing = Attainment(None, Boundary(None, None, "nodata"), None)
        sig = Signals(at=at, reporting_replicas=1, request_rate=1.0, prefix_cache_hit_rate=0.5)
        return Observation(sig, nothing, nothing, None, PROMPTS, 100.0, 600.0)


def converted(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """Every spec turned into a plan request, by anyone, from now on."""
    import tokenfleet.api
    import tokenfleet.api.planrequest
    import tokenfleet.render.desired

    real, calls = tokenfleet.api.planrequest.to_plan_request, []

    def counting(*args: Any, **kwargs: Any) -> Any:
        calls.append(args[0])
        return real(*args, **kwargs)

    for module in (tokenfleet.api, tokenfleet.api.planrequest, tokenfleet.render.desired):
        monkeypatch.setattr(module, "to_plan_request", counting)
    return calls


def planned() -> tuple[Pipeline, list[Any]]:
    pipeline = Pipeline.default()
    real, calls = pipeline.plan, []

    def counting(request: Any) -> Any:
        calls.append(request)
        return real(request)

    return dataclasses.replace(pipeline, plan=counting), calls


async def test_the_spec_is_planned_once_per_generation(
    cluster: Cluster, start_operator: StartOperator, monkeypatch: pytest.MonkeyPatch
) -> None:
    pipeline, plans = planned()
    requests = converted(monkeypatch)
    policy = StubPolicy()  # keeps the replicas: no scale, no new generation of its own
    await start_operator(pipeline, autoscaler={"source": MixSource(), "decide": policy, "url": URL})
    await create(cluster, autoscaled())

    def ticked(n: int) -> bool:
        auto = status(cluster).get("autoscaling") or {}
        return len(policy.calls) >= n and "attainability" in auto

    await eventually(lambda: ticked(3), what="three decisions with the SLO's ceiling")
    auto = status(cluster)["autoscaling"]
    assert auto["capacity"]["predictedAtMix"] > 0  # the mix's capacity: the kept plan's
    # The prefix feed: the kept plan at the observed hit rate, not the spec's prediction.
    assert (
        auto["capacity"]["predicted"]
        != status(cluster)["plan"]["predicted"]["goodputRequestsPerSecond"]
    )
    # A drift pass: the Service deleted by hand is re-applied, from the same plan.
    assert (await cluster.delete(f"/api/v1/namespaces/{NAMESPACE}/services/{NAME}")).status < 300
    await eventually(lambda: cluster.get(SERVICES, NAMESPACE, NAME), what="the Service back")
    seen = len(policy.calls)
    await eventually(lambda: ticked(seen + 2), what="two more decisions")
    assert len(plans) == len(requests) == 1

    # A new generation is planned once more, and only once.
    change = {"spec": {"workload": {"maxModelLen": 4096}}}
    await patch(cluster, f"{LLMS_PATH}/{NAME}", change)
    await eventually(lambda: status(cluster).get("observedGeneration") == 2, what="generation 2")
    seen = len(policy.calls)
    await eventually(lambda: ticked(seen + 2), what="two decisions on generation 2")
    assert len(plans) == len(requests) == 2
    assert [p.max_model_len for p in plans] == [8192, 4096]
