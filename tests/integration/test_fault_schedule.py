"""Issue 8's fault schedule, against the real `tokenfleet operator` process: 500s that
persist, dropped connections, 409s on status writes, cut watches, and a SIGKILL while a
reconcile is halfway through its writes.

At the end every LLMService's objects equal the render of its last spec (no object
missing, none extra, none duplicated), and the LLMService whose apply kept failing said
so in its status while the failure lasted.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from kmock import Server

from tests.support.cluster_objects import LLMS_PATH, example, owned
from tests.support.operator_harness import NAMESPACE, kubeconfig_for
from tests.support.operator_process import OperatorProcess
from tokenfleet.controller.reconcile import Pipeline, own
from tokenfleet.render.desired import Cluster as Serves
from tokenfleet.render.desired import desired
from tokenfleet.testing.kmock_cluster import LLMSERVICES, Cluster

NAMES = ("fs-a", "fs-b", "fs-c")


def llms(cluster: Cluster, name: str) -> dict[str, Any]:
    return cluster.get(LLMSERVICES, NAMESPACE, name) or {}


def degraded(cluster: Cluster, name: str) -> dict[str, Any]:
    conditions = (llms(cluster, name).get("status") or {}).get("conditions") or []
    return next((c for c in conditions if c["type"] == "Degraded"), {})


def settled(cluster: Cluster, name: str) -> bool:
    obj = llms(cluster, name)
    status = obj.get("status") or {}
    current = status.get("observedGeneration") == obj["metadata"]["generation"]
    return current and degraded(cluster, name).get("status") == "False"


def expected(body: dict[str, Any]) -> dict[tuple[str, str], dict[str, Any]]:
    """What the operator must have applied for this LLMService body: the pure render."""
    service = Pipeline.default().parse(body)
    manifests = desired(service, None, Serves(monitoring=False, lws=False)).manifests
    return {(m["kind"], m["metadata"]["name"]): own(m, body) for m in manifests}


def actual(cluster: Cluster, name: str) -> dict[tuple[str, str], list[dict[str, Any]]]:
    found: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for obj in owned(cluster):
        if obj["metadata"]["labels"].get("tokenfleet.dev/llmservice") == name:
            found.setdefault((obj["kind"], obj["metadata"]["name"]), []).append(obj)
    return found


async def merge(cluster: Cluster, name: str, patch: dict[str, Any]) -> None:
    headers = {"Content-Type": "application/merge-patch+json"}
    response = await cluster.patch(f"{LLMS_PATH}/{name}", json=patch, headers=headers)
    assert response.status < 300, await response.text()


async def test_final_state_is_the_render_of_the_last_spec_under_faults(tmp_path: Path) -> None:
    async with Cluster() as cluster, Server(cluster) as server:
        cluster.objects["v1/namespaces", None, NAMESPACE] = {"metadata": {"name": NAMESPACE}}
        kubeconfig = tmp_path / "kubeconfig"
        kubeconfig.write_text(yaml.safe_dump(kubeconfig_for(str(server.url).rstrip("/"))))
        operator = OperatorProcess(kubeconfig, tmp_path / "operator.log")

        # Phase 1: a persistent 500, dropped connections, 409s on status.
        cluster.fail("PATCH", r"/deployments/fs-a$", 500, times=10**6, message="etcd is down")
        cluster.fail("PATCH", r"/services/fs-b$", 0, times=3, drop=True)
        cluster.fail("PATCH", r"/llmservices/fs-c/status$", 409, times=3, message="stale")
        operator.start()
        try:
            await operator.watching(cluster)
            for name in NAMES:
                body = example("llama-3.1-8b-l4.yaml")
                body["metadata"]["name"] = name
                response = await cluster.post(LLMS_PATH, json=body)
                assert response.status < 300
            await operator.wait(
                lambda: degraded(cluster, "fs-a").get("reason") == "ApplyRetrying",
                "fs-a to report its persistent error",
            )
            assert "etcd is down" in degraded(cluster, "fs-a")["message"]
            await operator.wait(
                lambda: settled(cluster, "fs-b") and settled(cluster, "fs-c"), "fs-b, fs-c"
            )

            # Phase 2: watches cut, spec edits, and a SIGKILL while fs-b's new Deployment
            # write is on the wire (its dry-run passed, its PVC is written).
            assert cluster.cut_watches() > 0
            gate = cluster.hold("PATCH", r"/deployments/fs-b$", dry_run=False)
            await merge(
                cluster, "fs-b", {"spec": {"replicas": 2, "workload": {"maxModelLen": 4096}}}
            )
            await operator.wait(lambda: cluster.held >= 1, "fs-b's reconcile mid-write")
            operator.kill()
            gate.set()  # the apiserver finishes the request of a dead client
            await merge(cluster, "fs-c", {"spec": {"replicas": 3, "storage": None}})
            cluster.clear_faults()  # fs-a's outage ends while the operator is down

            # Phase 3: a new process resumes; its watches are cut once more, and fs-a is
            # edited after that (the edit must arrive through the resumed watch).
            mark = len(cluster._requests)
            operator.start()
            await operator.watching(cluster, since=mark)
            await operator.wait(lambda: all(settled(cluster, n) for n in NAMES[1:]), "b, c")
            cluster.cut_watches()
            await merge(cluster, "fs-a", {"spec": {"workload": {"maxModelLen": 6144}}})
            await operator.wait(
                lambda: (
                    all(settled(cluster, n) for n in NAMES)
                    and llms(cluster, "fs-a")["status"]["observedGeneration"] == 2
                ),
                "every LLMService settled on its last spec",
                timeout=60,
            )
        finally:
            operator.stop()

        for name in NAMES:
            want = expected(llms(cluster, name))
            have = actual(cluster, name)
            # Nothing missing, nothing extra but the claims kept by storage.retain.
            retained = llms(cluster, name)["status"].get("retainedClaims") or []
            assert set(want) <= set(have), name
            assert set(have) - set(want) == {("PersistentVolumeClaim", c) for c in retained}
            for key, manifest in want.items():
                (obj,) = have[key]  # no duplicates
                assert obj["spec"] == manifest["spec"], (name, key)
                meta = obj["metadata"]
                assert meta["ownerReferences"] == manifest["metadata"]["ownerReferences"]
                assert manifest["metadata"]["labels"].items() <= meta["labels"].items()
        # fs-c's cache claim stays (storage.retain defaults to keep) and is reported.
        assert llms(cluster, "fs-c")["status"]["retainedClaims"] == ["fs-c-model-cache"]
        log = operator.text()
        assert "Traceback" not in log, log[log.index("Traceback") - 500 :][:4000]
