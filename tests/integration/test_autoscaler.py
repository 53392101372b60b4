"""The autoscaler's wiring in the real operator (kopf in-process) against kmock.

The signals source and the policy are injected as parameters (the policy / signals boundary;
the PromQL runs against a real Prometheus in tests/system/test_signals_sim.py). What is
checked here is everything around them: replicas written through the scale subresource and
rendered into the Deployment, status.autoscaling, the Autoscaling condition, Events, metrics,
pod-deletion-cost before a scale-down, one loop per enabled LLMService and none otherwise.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from prometheus_client import generate_latest

from tests.support.autoscaler_stubs import NAME, URL, Source, StubPolicy, autoscaled, status
from tests.support.cluster_objects import (
    DEPLOYMENTS,
    LLMS_PATH,
    condition,
    condition_when,
    create,
    events,
    llms,
    patch,
)
from tests.support.operator_harness import NAMESPACE, StartOperator, eventually
from tokenfleet.autoscale.history import parse_iso
from tokenfleet.autoscale.types import Decision, Signals
from tokenfleet.testing.kmock_cluster import Cluster


async def start(
    start_operator: StartOperator, source: Source, policy: Callable[..., Decision]
) -> Any:
    return await start_operator(autoscaler={"source": source, "decide": policy, "url": URL})


async def test_scales_through_the_scale_subresource_and_records_the_decision(
    cluster: Cluster, start_operator: StartOperator
) -> None:
    source, policy = Source(), StubPolicy(target=3)
    operator = await start(start_operator, source, policy)
    await create(cluster, autoscaled())

    deployment = await eventually(
        lambda: (
            (d := cluster.get(DEPLOYMENTS, NAMESPACE, NAME))
            and d["spec"].get("replicas") == 3
            and d
        ),
        what="the Deployment rendered with the autoscaler's 3 replicas",
    )
    assert deployment["spec"].get("replicas") == 3
    assert llms(cluster, NAME)["spec"].get("replicas") == 3
    assert any(p.endswith(f"/llmservices/{NAME}/scale") for _, p in cluster.writes)
    auto = await eventually(
        lambda: (a := status(cluster).get("autoscaling")) and a.get("lastScaleTime") and a,
        what="status.autoscaling with lastScaleTime",
    )
    assert auto["desiredReplicas"] == 3 and auto["driver"] == "ttft"
    assert auto["signals"]["requestRate"] == 2.0 and auto["signals"]["reportingReplicas"] == 1
    predicted = status(cluster)["plan"]["predicted"]["goodputRequestsPerSecond"]
    assert auto["capacity"]["predicted"] == round(predicted, 4)
    cond = condition(cluster, NAME, "Autoscaling")
    assert (cond["status"], cond["reason"]) == ("True", "Active")
    # The query was scoped and shaped from the spec.
    query, url = source.queries[0]
    assert (query.namespace, query.llmservice, query.engine, url) == (NAMESPACE, NAME, "vllm", URL)
    assert query.ttft_slo_seconds == 1.0 and query.tpot_slo_seconds == 0.1
    await eventually(lambda: "ScaledUp" in {e.get("reason") for e in events(cluster)}, what="Event")
    exposition = generate_latest(operator.metrics.registry).decode()
    assert (
        f'tokenfleet_autoscaler_desired_replicas{{llmservice="{NAME}",namespace="{NAMESPACE}"}} 3.0'
        in exposition
    )
    assert 'direction="up",driver="ttft"' in exposition


async def test_limited_at_max_and_held_when_prometheus_is_down(
    cluster: Cluster, start_operator: StartOperator
) -> None:
    source, policy = Source(), StubPolicy(target=9)  # maxReplicas is 4
    await start(start_operator, source, policy)
    await create(cluster, autoscaled())
    cond = await condition_when(cluster, NAME, "Autoscaling", reason="LimitedAtMax")
    assert cond["status"] == "True"
    assert llms(cluster, NAME)["spec"].get("replicas") == 4

    source.down = True
    cond = await condition_when(cluster, NAME, "Autoscaling", reason="Held")
    assert cond["status"] == "False" and cond["message"].startswith("PrometheusDown")
    assert status(cluster)["autoscaling"]["held"] == "PrometheusDown"
    assert llms(cluster, NAME)["spec"].get("replicas") == 4  # held: nothing changed
    await eventually(
        lambda: "AutoscalingHeld" in {e.get("reason") for e in events(cluster)}, what="Event"
    )
    source.down = False
    await eventually(
        lambda: condition(cluster, NAME, "Autoscaling").get("reason") == "LimitedAtMax",
        what="resumed",
    )
    await eventually(
        lambda: "AutoscalingResumed" in {e.get("reason") for e in events(cluster)}, what="Event"
    )


async def test_disabled_leaves_replicas_to_the_user_and_delete_stops_the_loop(
    cluster: Cluster, start_operator: StartOperator
) -> None:
    source, policy = Source(), StubPolicy(target=2)
    operator = await start(start_operator, source, policy)
    await create(cluster, autoscaled())
    await eventually(lambda: llms(cluster, NAME)["spec"].get("replicas") == 2, what="scaled to 2")
    assert operator.autoscalers.running() == {(NAMESPACE, NAME)}

    await patch(cluster, f"{LLMS_PATH}/{NAME}", {"spec": {"autoscaling": {"enabled": False}}})
    await eventually(lambda: not operator.autoscalers.running(), what="the loop stopped")
    await eventually(
        lambda: condition(cluster, NAME, "Autoscaling").get("reason") == "Disabled",
        what="Autoscaling Disabled",
    )
    calls = len(policy.calls)
    # kubectl scale: the user's number stands and reaches the Deployment.
    await patch(cluster, f"{LLMS_PATH}/{NAME}/scale", {"spec": {"replicas": 1}})
    await eventually(
        lambda: cluster.get(DEPLOYMENTS, NAMESPACE, NAME)["spec"].get("replicas") == 1,
        what="the user's replicas rendered",
    )
    assert llms(cluster, NAME)["spec"].get("replicas") == 1
    assert len(policy.calls) == calls  # no decision since

    await patch(cluster, f"{LLMS_PATH}/{NAME}", {"spec": {"autoscaling": {"enabled": True}}})
    await eventually(lambda: operator.autoscalers.running(), what="the loop restarted")
    response = await cluster.delete(f"{LLMS_PATH}/{NAME}")
    assert response.status < 300
    await eventually(lambda: not operator.autoscalers.running(), what="stopped on delete")


async def test_scale_down_sets_pod_deletion_cost_from_requests_in_flight(
    cluster: Cluster, start_operator: StartOperator
) -> None:
    source, policy = Source(), StubPolicy(target=None)
    await start(start_operator, source, policy)
    body = autoscaled()
    body["spec"]["replicas"] = 3
    await create(cluster, body)
    await eventually(lambda: cluster.get(DEPLOYMENTS, NAMESPACE, NAME), what="Deployment")
    for pod in ("busy", "idle", "mid"):
        await create(
            cluster,
            {"apiVersion": "v1", "kind": "Pod",
             "metadata": {"name": pod, "labels": {"tokenfleet.dev/llmservice": NAME}}},
            f"/api/v1/namespaces/{NAMESPACE}/pods",
        )  # fmt: skip
    await create(  # another service's pod: never touched
        cluster,
        {"apiVersion": "v1", "kind": "Pod",
         "metadata": {"name": "other", "labels": {"tokenfleet.dev/llmservice": "other"}}},
        f"/api/v1/namespaces/{NAMESPACE}/pods",
    )  # fmt: skip
    source.load = {"busy": 7.0, "mid": 2.4}
    policy.target = 2

    await eventually(lambda: llms(cluster, NAME)["spec"].get("replicas") == 2, what="scaled down")
    costs = {
        p["metadata"]["name"]: (p["metadata"].get("annotations") or {}).get(
            "controller.kubernetes.io/pod-deletion-cost"
        )
        for p in cluster.items("v1/pods")
    }
    assert costs == {"busy": "7", "idle": "0", "mid": "2", "other": None}
    await eventually(
        lambda: "ScaledDown" in {e.get("reason") for e in events(cluster)}, what="Event"
    )


async def test_without_a_prometheus_url_it_waits_and_says_what_to_set(
    cluster: Cluster, start_operator: StartOperator
) -> None:
    policy = StubPolicy(target=3)
    await start_operator(autoscaler={"source": Source(), "decide": policy})
    await create(cluster, autoscaled())
    cond = await eventually(
        lambda: (
            "--prometheus-url" in (c := condition(cluster, NAME, "Autoscaling")).get("message", "")
            and c
        ),
        what="AwaitingMetrics naming the flag",
    )
    assert (cond["status"], cond["reason"]) == ("Unknown", "AwaitingMetrics")
    assert policy.calls == [] and llms(cluster, NAME)["spec"].get("replicas", 1) == 1


async def test_the_real_policy_scales_up_on_a_load_above_the_plans_capacity(
    cluster: Cluster, start_operator: StartOperator
) -> None:
    """No stub: tokenfleet.autoscale.policy.decide, fed signals far above what the plan says
    one replica serves, on a fleet whose one replica is ready and reporting."""
    source = Source()
    await start_operator(autoscaler={"source": source, "url": URL})
    await create(cluster, autoscaled())
    plan = await eventually(lambda: status(cluster).get("plan"), what="the plan")
    capacity = plan["predicted"]["goodputRequestsPerSecond"]
    source.current = Signals(
        at=0.0, reporting_replicas=1, request_rate=10 * capacity,
        ttft_quantile_seconds=2.0, ttft_attainment=0.5, tpot_attainment=1.0,
        goodput=0.5 * capacity, running_per_replica=8.0, waiting_per_replica=20.0,
        kv_usage=0.9, newest_sample_age_seconds=1.0,
    )  # fmt: skip
    await patch(
        cluster,
        f"/apis/apps/v1/namespaces/{NAMESPACE}/deployments/{NAME}/status",
        {"status": {"replicas": 1, "readyReplicas": 1}},
    )
    try:
        await eventually(
            lambda: (llms(cluster, NAME)["spec"].get("replicas") or 1) > 1, what="a scale-up"
        )
    except AssertionError as error:  # say what the policy decided instead
        raise AssertionError(f"{error}; status: {status(cluster)}") from None
    # The status is written just after the scale: wait for it too.
    auto = await eventually(
        lambda: (a := status(cluster)["autoscaling"])["desiredReplicas"] > 1 and a,
        what="the scale-up in status.autoscaling",
    )
    assert auto.get("held") is None
    assert auto["capacity"]["predicted"] == round(capacity, 4)
    assert condition(cluster, NAME, "Autoscaling")["status"] == "True"


async def test_the_policy_memory_survives_an_operator_restart(
    cluster: Cluster, start_operator: StartOperator
) -> None:
    """The learnt capacity, the last scale and the last decision come back from status."""
    first_policy = StubPolicy(target=2, learnt=1.5)
    first = await start(start_operator, Source(), first_policy)
    await create(cluster, autoscaled())
    auto = await eventually(
        lambda: (a := status(cluster).get("autoscaling") or {}).get("lastScaleTime") and a,
        what="a scale recorded in status",
    )
    assert auto["capacity"]["observed"] == 1.5
    await first.stop()

    second_policy = StubPolicy(target=None)
    await start(start_operator, Source(), second_policy)
    await eventually(lambda: second_policy.histories, what="a decision after the restart")
    history = second_policy.histories[0]
    assert history.capacity is not None and history.capacity.observed == 1.5
    scaled_at = parse_iso(auto["lastScaleTime"])
    assert history.last_scale_up_at == scaled_at and history.last_scale_down_at == scaled_at
    assert [r.replicas for r in history.recommendations] == [auto["desiredReplicas"]]


async def test_a_conflict_that_left_the_spec_alone_is_retried_in_the_same_decision(
    cluster: Cluster, start_operator: StartOperator
) -> None:
    # One decision only (an hour's interval): the 409 (as from a status write in between)
    # must not cost it.
    cluster.fail("PATCH", rf"/llmservices/{NAME}/scale$", 409, times=1)
    policy = StubPolicy(target=2)
    await start(start_operator, Source(), policy)
    await create(cluster, autoscaled(interval=3600))
    await eventually(lambda: llms(cluster, NAME)["spec"].get("replicas") == 2, what="scaled")
    assert len(policy.calls) == 1


async def test_a_users_scale_during_a_decision_wins(
    cluster: Cluster, start_operator: StartOperator
) -> None:
    policy = StubPolicy(target=2)
    await start(start_operator, Source(), policy)
    await create(cluster, autoscaled())
    await eventually(lambda: llms(cluster, NAME)["spec"].get("replicas") == 2, what="scaled")

    # The next scale is held in flight while a user sets replicas by editing the spec.
    release = cluster.hold("PATCH", rf"/llmservices/{NAME}/scale$")
    policy.target = 4
    await eventually(lambda: cluster.held, what="the autoscaler's scale in flight")
    await patch(cluster, f"{LLMS_PATH}/{NAME}", {"spec": {"replicas": 1}})
    policy.target = None  # from now on the policy keeps whatever it finds
    release.set()
    await eventually(lambda: not cluster.held, what="the held scale answered")
    await eventually(
        lambda: cluster.get(DEPLOYMENTS, NAMESPACE, NAME)["spec"]["replicas"] == 1,
        what="the user's replicas rendered",
    )
    assert llms(cluster, NAME)["spec"]["replicas"] == 1  # the stale decision wrote nothing
    assert f"{LLMS_PATH}/{NAME}/scale" in cluster.conflicts


async def test_the_observed_prefix_hit_rate_feeds_the_predicted_capacity(
    cluster: Cluster, start_operator: StartOperator
) -> None:
    """No workload.prefixCacheHitRate: the engines' hit rate re-plans the capacity the
    policy starts from, and status shows both; a configured rate wins over it."""
    source = Source()
    policy = StubPolicy()
    await start(start_operator, source, policy)
    body = autoscaled()
    body["spec"].setdefault("workload", {}).update({"inputTokens": 3000, "outputTokens": 64})
    await create(cluster, body)
    plan = await eventually(lambda: status(cluster).get("plan"), what="the plan")
    planned = round(plan["predicted"]["goodputRequestsPerSecond"], 4)
    source.current = Signals(at=0.0, reporting_replicas=1, request_rate=1.0,
                             prefix_cache_hit_rate=0.6)  # fmt: skip
    auto = await eventually(
        lambda: (
            (a := status(cluster).get("autoscaling") or {})
            .get("signals", {})
            .get("prefixCacheHitRate")
            == 0.6
            and a
        ),
        what="the hit rate in status.autoscaling.signals",
    )
    assert auto["capacity"]["predicted"] > planned
    await patch(cluster, f"{LLMS_PATH}/{NAME}", {"spec": {"workload": {"prefixCacheHitRate": 0.1}}})
    await eventually(
        lambda: status(cluster).get("observedGeneration") == 2,
        what="the plan at the configured hit rate",
    )
    configured = round(status(cluster)["plan"]["predicted"]["goodputRequestsPerSecond"], 4)
    assert configured != auto["capacity"]["predicted"]
    await eventually(
        lambda: (
            (status(cluster).get("autoscaling") or {}).get("capacity", {}).get("predicted")
            == configured
        ),
        what="the configured hit rate's plan in status.autoscaling.capacity",
    )
