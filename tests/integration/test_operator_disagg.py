"""Disaggregated serving against the real operator (kopf in-process) and the kmock apiserver.

Scaled: the decode pool follows the autoscaler's regular decision on the decode pods' series,
the prefill pool its own queue-wait signal inside the plan's ratio band, each Deployment
with its own replicas.

On: the planner's choice (serving.mode auto) runs a decode and a prefill Deployment, llm-d's
routing sidecar identity and the picker's disaggregation profile, all owned by the
LLMService; status.plan.serving says which kind won and gives both roles. Off again
(serving.mode aggregated): the role workloads and the sidecar's identity are pruned and the
one aggregated workload runs. Each constraint the engines or the cluster impose is refused
with the field, the value and the fix, and nothing is created.
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass, field
from typing import Any

import pytest
import yaml

from tests.support.autoscaler_stubs import URL, StubPolicy
from tests.support.cluster_objects import (
    DEPLOYMENTS,
    LLMS_PATH,
    condition,
    create,
    degraded_condition,
    example,
    llms,
    owned,
    patch,
)
from tests.support.operator_harness import NAMESPACE, StartOperator, eventually
from tokenfleet.autoscale.signals import Attainment, Boundary, Observation, SignalsQuery
from tokenfleet.autoscale.types import Signals
from tokenfleet.testing.kmock_cluster import HTTPROUTES, INFERENCEPOOLS, PODMONITORS, Cluster

NAME = "llama-3-1-70b-pd"
ACCOUNTS = "v1/serviceaccounts"
BINDINGS = "rbac.authorization.k8s.io/v1/rolebindings"
SIDECAR = f"{NAME}-pd-sidecar"
ROLES = [f"{NAME}-decode", f"{NAME}-prefill"]


def pd_example() -> dict[str, Any]:
    return copy.deepcopy(example("llama-3.1-70b-pd-h100.yaml"))


def deployments(cluster: Cluster) -> set[str]:
    return {d["metadata"]["name"] for d in cluster.items(DEPLOYMENTS)}


async def test_disaggregated_on_then_off(cluster: Cluster, start_operator: StartOperator) -> None:
    for api in (INFERENCEPOOLS, HTTPROUTES, PODMONITORS):
        cluster.install(api)
    await start_operator()
    await create(cluster, pd_example())
    await eventually(lambda: set(ROLES) <= deployments(cluster), what="both role workloads")
    assert NAME not in deployments(cluster)  # no aggregated workload beside them
    # The InferencePool comes last of the routing objects (render/routing).
    await eventually(lambda: cluster.get(INFERENCEPOOLS, NAMESPACE, NAME), what="the routing")
    uid = llms(cluster, NAME)["metadata"]["uid"]
    for key, name in [(DEPLOYMENTS, r) for r in ROLES] + [(ACCOUNTS, SIDECAR), (BINDINGS, SIDECAR)]:
        obj = cluster.get(key, NAMESPACE, name)
        assert [r["uid"] for r in obj["metadata"]["ownerReferences"]] == [uid], (key, name)
    decode = cluster.get(DEPLOYMENTS, NAMESPACE, f"{NAME}-decode")
    assert decode["spec"]["template"]["metadata"]["labels"]["llm-d.ai/role"] == "decode"
    picker = cluster.get(DEPLOYMENTS, NAMESPACE, f"{NAME}-epp")
    args = picker["spec"]["template"]["spec"]["containers"][0]["args"]
    text = next(a for a in args if a.startswith("--config-text="))
    config = yaml.safe_load(text.split("=", 1)[1])
    assert {p["name"] for p in config["schedulingProfiles"]} == {"prefill", "decode"}
    serving = await eventually(
        lambda: llms(cluster, NAME).get("status", {}).get("plan", {}).get("serving"),
        what="status.plan.serving",
    )
    assert serving["mode"] == "disaggregated" and serving["why"].startswith("disaggregated at")
    assert [r["role"] for r in serving["roles"]] == ["prefill", "decode"]
    # The scale subresource counts the decode workload's pods.
    assert llms(cluster, NAME)["status"]["replicas"] == decode["spec"]["replicas"]

    await patch(cluster, f"{LLMS_PATH}/{NAME}", {"spec": {"serving": {"mode": "aggregated"}}})
    await eventually(lambda: NAME in deployments(cluster), what="the aggregated workload")
    await eventually(
        lambda: not set(ROLES) & deployments(cluster), what="the role workloads pruned"
    )
    await eventually(
        lambda: cluster.get(ACCOUNTS, NAMESPACE, SIDECAR) is None, what="the sidecar's account"
    )
    assert cluster.get(BINDINGS, NAMESPACE, SIDECAR) is None
    assert cluster.get(ACCOUNTS, NAMESPACE, f"{NAME}-epp")  # the picker's stays
    assert condition(cluster, NAME, "Degraded")["status"] == "False"


def small(**serving: Any) -> dict[str, Any]:
    """8B on H100, disaggregated with fixed role TPs (plans in a fraction of a second)."""
    body = pd_example()
    body["metadata"]["name"] = "pd-small"
    body["spec"]["model"] = {"id": "meta-llama/Llama-3.1-8B"}
    body["spec"]["serving"] = {"mode": "disaggregated", "prefill": {"tensorParallelSize": 1},
                               "decode": {"tensorParallelSize": 1}, **serving}  # fmt: skip
    return body


def with_spec(body: dict[str, Any], **sections: dict[str, Any]) -> dict[str, Any]:
    for section, values in sections.items():
        body["spec"].setdefault(section, {}).update(values)
    return body


@pytest.mark.parametrize(
    ("body", "apis", "reason", "fragment"),
    [
        # The InferencePool API is not served: no path sends requests to a prefill pod.
        (small(), (), None, "needs the InferencePool API"),
        # vLLM before 0.32: NixlConnector asserts on decode TP below prefill TP.
        (with_spec(small(prefill={"tensorParallelSize": 2}), engine={"version": "0.20.0"}),
         (INFERENCEPOOLS,), "PlanFailed",
         "spec.serving.decode.tensorParallelSize=1: decode TP 1 is below prefill TP 2"),
        # A vLLM without the connector setting the decode role needs.
        (with_spec(small(), engine={"version": "0.11.0"}), (INFERENCEPOOLS,), "PlanFailed",
         "spec.engine.version=0.11.0"),
        # SGLang's Mooncake between unequal TP sizes, for a model without MLA.
        (with_spec(small(transferBackend="mooncake", decode={"tensorParallelSize": 2}),
                   engine={"kind": "sglang"}), (INFERENCEPOOLS,), "PlanFailed",
         "spec.serving.decode.tensorParallelSize=2"),
        # Decode pods run the sidecar under the operator's ServiceAccount.
        (with_spec(small(), podTemplate={"serviceAccountName": "mine"}), (INFERENCEPOOLS,),
         None, "spec.podTemplate.serviceAccountName=mine"),
        # P/D without routing, slipped past the CRD's CEL rule (an older CRD).
        (with_spec(small(), routing={"enabled": False}), (INFERENCEPOOLS,), "InvalidSpec",
         "spec.serving.mode disaggregated or auto needs spec.routing.enabled: true"),
    ],
    ids=["no-pool-api", "decode-tp-below-prefill", "vllm-without-policy", "mooncake-unequal-tp",
         "users-service-account", "no-routing"],
)  # fmt: skip
async def test_refused_with_the_field_and_nothing_created(
    cluster: Cluster,
    start_operator: StartOperator,
    body: dict[str, Any],
    apis: tuple[str, ...],
    reason: str | None,
    fragment: str,
) -> None:
    for api in apis:
        cluster.install(api)
    await start_operator()
    await create(cluster, copy.deepcopy(body))
    name = body["metadata"]["name"]
    degraded = await degraded_condition(cluster, name)
    if reason is not None:
        assert degraded["reason"] == reason
    assert fragment in degraded["message"], degraded["message"]
    assert " --" not in degraded["message"]  # spec fields, not CLI flags
    assert owned(cluster) == []  # nothing half-created
    assert cluster.items(ACCOUNTS) == [] and cluster.items(BINDINGS) == []


@dataclass
class RoleSource:
    """Signals per pool: the prefill pods' request rate and queue wait as the test sets them."""

    prefill_rate: float = 6.0
    prefill_wait: float = 0.0
    queries: list[SignalsQuery] = field(default_factory=list)

    async def signals(self, query: SignalsQuery, url: str, at: float) -> Observation:
        self.queries.append(query)
        nothing = Attainment(None, Boundary(None, None, "nodata"), None)
        if query.role == "prefill":
            sig = Signals(at=at, reporting_replicas=1, request_rate=self.prefill_rate,
                          queue_wait_quantile_seconds=self.prefill_wait)  # fmt: skip
        else:
            sig = Signals(at=at, reporting_replicas=1, request_rate=self.prefill_rate)
        return Observation(sig, nothing, nothing)

    async def pod_load(self, query: SignalsQuery, url: str, at: float) -> dict[str, float]:
        return {}


async def test_role_pools_scaled_independently(
    cluster: Cluster, start_operator: StartOperator
) -> None:
    """The decode pool follows the regular decision (a stub at 2 here), the prefill pool its
    own signal inside the plan's band; the two Deployments carry each."""
    for api in (INFERENCEPOOLS, HTTPROUTES, PODMONITORS):
        cluster.install(api)
    source, policy = RoleSource(), StubPolicy(target=2)
    await start_operator(autoscaler={"source": source, "decide": policy, "url": URL})
    body = pd_example()
    body["spec"]["autoscaling"] = {"enabled": True, "intervalSeconds": 5, "minReplicas": 1,
                                   "maxReplicas": 4}  # fmt: skip
    await create(cluster, body)
    serving = await eventually(
        lambda: llms(cluster, NAME).get("status", {}).get("plan", {}).get("serving"),
        what="status.plan.serving",
    )
    prefill = next(r for r in serving["roles"] if r["role"] == "prefill")
    low, high = serving["prefillPerDecodeBand"]
    need = math.ceil(source.prefill_rate / prefill["goodputRequestsPerSecond"] - 1e-9)
    expected = min(max(need, math.ceil(low * 2 - 1e-9)), math.ceil(high * 2 - 1e-9))

    def replicas(role: str) -> int | None:
        d = cluster.get(DEPLOYMENTS, NAMESPACE, f"{NAME}-{role}")
        return None if d is None else int(d["spec"]["replicas"])

    await eventually(
        lambda: replicas("decode") == 2 and replicas("prefill") == expected,
        what=f"decode at 2, prefill at {expected}",
    )
    assert llms(cluster, NAME)["spec"]["serving"]["prefillReplicas"] == expected
    assert {q.role for q in source.queries} == {"decode", "prefill"}
    auto = await eventually(
        lambda: (a := llms(cluster, NAME)["status"].get("autoscaling")) and a.get("roles") and a,
        what="status.autoscaling.roles",
    )
    by_role = {r["role"]: r for r in auto["roles"]}
    assert by_role["decode"]["replicas"] == 2 and by_role["prefill"]["replicas"] == expected

    # The prefill queue waits past its budget: the prefill pool grows, decode does not move
    # (unless the band's low end already holds the prefill pool higher).
    source.prefill_wait = 10.0
    grown = min(expected + 1, math.ceil(high * 2 - 1e-9))
    await eventually(lambda: replicas("prefill") == grown, what=f"prefill at {grown}")
    assert replicas("decode") == 2
