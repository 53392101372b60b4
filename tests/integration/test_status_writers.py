"""Two writers share one status and neither loses the other's data (issue 8, item 7).

The reconciler owns Planned / Ready / Progressing / Degraded and the workload keys, the
autoscaler owns Autoscaling and status.autoscaling. Every write is composed onto the latest
status and sent with its resourceVersion; the emulator answers a stale one with 409 (as the
apiserver does), and the writer re-reads and composes again.
"""

from __future__ import annotations

import asyncio
import logging

import kopf

from tests.support.autoscaler_stubs import NAME, URL, Source, StubPolicy, autoscaled, status
from tests.support.cluster_objects import DEPLOYMENTS, LLMS_PATH, condition, create, example, patch
from tests.support.operator_harness import NAMESPACE, StartOperator, eventually
from tokenfleet.autoscale.types import Decision, History
from tokenfleet.controller import status as st
from tokenfleet.controller.autoscaler_status import compose_autoscaler_status
from tokenfleet.controller.handlers import Credentials
from tokenfleet.controller.kube import KubeClient
from tokenfleet.controller.statuswrite import write_status
from tokenfleet.testing.kmock_cluster import Cluster


async def client() -> KubeClient:
    credentials = Credentials()
    await asyncio.to_thread(
        credentials.login, logger=logging.getLogger("test"), settings=kopf.OperatorSettings()
    )
    return KubeClient(credentials.current)


async def test_a_stale_writer_gets_409_and_composes_onto_the_other_writers_status(
    cluster: Cluster,
) -> None:
    await create(cluster, autoscaled())
    kube = await client()
    try:
        stale = await kube.get("tokenfleet.dev/v1alpha1", "LLMService", NAMESPACE, NAME)
        assert stale is not None
        # The reconciler writes first...
        observed = st.Observed(1, replicas=2, ready_replicas=2, endpoint="http://x/v1")
        first = await write_status(
            kube, NAMESPACE, NAME, lambda o: st.reconciler_status(o.get("status") or {}, observed),
            body=stale,
        )  # fmt: skip
        assert first is not None and first.written
        # ...then the autoscaler, from the SAME (now stale) read.
        decision = Decision(2, 2, "steady", "ttft", History())
        second = await write_status(
            kube, NAMESPACE, NAME,
            lambda o: compose_autoscaler_status(o, decision, None, now=1e9, scaled=False),
            body=stale,
        )  # fmt: skip
        assert second is not None and second.written
    finally:
        await kube.close()

    assert cluster.conflicts == [f"{LLMS_PATH}/{NAME}/status"]  # exactly one stale write
    final = status(cluster)
    assert final["endpoint"] == "http://x/v1" and final["readyReplicas"] == 2  # reconciler's
    assert final["autoscaling"]["desiredReplicas"] == 2  # autoscaler's
    types = {c["type"]: c for c in final["conditions"]}
    assert types["Ready"]["status"] == "True"
    assert types["Autoscaling"]["reason"] == "Active"


async def test_a_reconcile_racing_the_autoscaler_reverts_nothing(
    cluster: Cluster, start_operator: StartOperator
) -> None:
    source, policy = Source(), StubPolicy(target=None)
    await start_operator(autoscaler={"source": source, "decide": policy, "url": URL})
    await create(cluster, autoscaled())
    await eventually(
        lambda: condition(cluster, NAME, "Autoscaling").get("reason") == "Active", what="Active"
    )
    decided = status(cluster)["autoscaling"]["lastDecisionTime"]

    # A reconcile starts (the Deployment reports a ready pod) and is held inside its apply,
    # after it read the LLMService: its status write will carry that older resourceVersion.
    release = cluster.hold("PATCH", rf"/deployments/{NAME}$")
    await patch(
        cluster,
        f"/apis/apps/v1/namespaces/{NAMESPACE}/deployments/{NAME}/status",
        {"status": {"replicas": 1, "readyReplicas": 1}},
    )
    # Meanwhile the autoscaler decides again and writes its part.
    written = await eventually(
        lambda: (t := status(cluster)["autoscaling"]["lastDecisionTime"]) != decided and t,
        what="an autoscaler write during the held reconcile",
    )
    release.set()
    await eventually(
        lambda: condition(cluster, NAME, "Ready").get("status") == "True", what="Ready=True"
    )
    final = status(cluster)
    assert final["readyReplicas"] == 1
    assert final["autoscaling"]["lastDecisionTime"] >= written  # not reverted to `decided`
    assert condition(cluster, NAME, "Autoscaling")["reason"] == "Active"
    assert f"{LLMS_PATH}/{NAME}/status" in cluster.conflicts  # the race really happened


async def test_endpoint_and_plan_disappear_when_the_spec_turns_invalid(
    cluster: Cluster, start_operator: StartOperator
) -> None:
    await start_operator()
    await create(cluster, example("llama-3.1-8b-l4.yaml"))
    before = await eventually(
        lambda: (s := status(cluster)).get("endpoint") and s.get("plan") and s,
        what="endpoint and plan",
    )
    await patch(cluster, f"{LLMS_PATH}/{NAME}", {"spec": {"workload": {"maxModelLenn": 1}}})
    await eventually(
        lambda: condition(cluster, NAME, "Degraded").get("reason") == "InvalidSpec",
        what="Degraded InvalidSpec",
    )
    after = status(cluster)
    assert "endpoint" not in after and "plan" not in after
    # What describes the running workload stays for the scale subresource.
    assert after["replicas"] == before["replicas"] and after["selector"] == before["selector"]
    assert cluster.get(DEPLOYMENTS, NAMESPACE, NAME)  # nothing was deleted
