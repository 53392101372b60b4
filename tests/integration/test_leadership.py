"""Issue 17: only the active peer acts. Two real `tokenfleet operator` processes with kopf
peering against the emulated API; when the second (higher priority) starts, kopf pauses the
first, and from then on the first sends no write (kopf's own peering keep-alives aside) and
no Prometheus query, while the second does the work; when the second exits, the first
resumes.

Each process has its own bearer token (the emulated API's request log tells them apart)
and its own --prometheus-url (each fake Prometheus counts its own queries)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import yaml
from kmock import Server

from tests.support.cluster_objects import create, example
from tests.support.fake_prometheus import FakePrometheus
from tests.support.operator_harness import NAMESPACE, kubeconfig_for
from tests.support.operator_process import OperatorProcess
from tokenfleet.testing.kmock_cluster import PEERINGS, Cluster

WRITES = {"POST", "PUT", "PATCH", "DELETE"}
# Long enough for 3 autoscaler ticks (intervalSeconds 5) and 3 resyncs of the paused one.
QUIET_SECONDS = 16.0


def kubeconfig(path: Path, server: str, token: str) -> Path:
    config = kubeconfig_for(server)
    config["users"][0]["user"]["token"] = token
    path.write_text(yaml.safe_dump(config))
    return path


def writes_by(cluster: Cluster, token: str, since: int = 0) -> list[str]:
    """Writes sent with this token after request `since`, kopf's peering keep-alives aside
    (they are how leader election works)."""
    return [
        f"{r.method} {r.url.path}"
        for r in list(cluster._requests)[since:]
        if str(r.method).upper().rsplit(".", 1)[-1] in WRITES
        and r.headers.get("Authorization") == f"Bearer {token}"
        and "/kopf.dev/" not in r.url.path
    ]


def autoscaled() -> dict[str, Any]:
    body = example("llama-3.1-8b-l4.yaml")
    body["spec"]["autoscaling"].update({"enabled": True, "intervalSeconds": 5})
    body["spec"]["autoscaling"].pop("prometheus", None)  # each operator's --prometheus-url
    return body


async def test_the_paused_replica_sends_no_write_and_no_query(tmp_path: Path) -> None:
    async with Cluster() as cluster, Server(cluster) as server:
        url = str(server.url).rstrip("/")
        cluster.objects["v1/namespaces", None, NAMESPACE] = {"metadata": {"name": NAMESPACE}}
        cluster.install(PEERINGS)
        cluster.objects[PEERINGS, None, "tokenfleet"] = {
            "apiVersion": "kopf.dev/v1",
            "kind": "ClusterKopfPeering",
            "metadata": {"name": "tokenfleet"},
        }
        async with FakePrometheus() as prom_a, FakePrometheus() as prom_b:
            common = ["--peering", "tokenfleet", "--resync-seconds", "3"]
            a = OperatorProcess(
                kubeconfig(tmp_path / "a.kubeconfig", url, "token-a"), tmp_path / "a.log",
                *common, "--priority", "10", "--prometheus-url", prom_a.url, standalone=False,
            )  # fmt: skip
            b = OperatorProcess(
                kubeconfig(tmp_path / "b.kubeconfig", url, "token-b"), tmp_path / "b.log",
                *common, "--priority", "20", "--prometheus-url", prom_b.url, standalone=False,
            )  # fmt: skip
            try:
                a.start()
                await a.watching(cluster)
                await create(cluster, autoscaled())
                await a.wait(lambda: prom_a.queries > 0, "the first replica to query")
                await a.wait(lambda: writes_by(cluster, "token-a"), "the first replica to write")

                b.start()
                await a.wait(lambda: "pausing the autoscalers" in a.text(), "the pause")
                paused_at, queries_a = len(cluster._requests), prom_a.queries
                await asyncio.sleep(QUIET_SECONDS)
                assert writes_by(cluster, "token-a", paused_at) == []
                assert prom_a.queries == queries_a
                # The window was one where work was due: the active replica did it.
                assert prom_b.queries > 0
                assert "Pausing operations in favour of" in a.text()  # kopf agrees

                b.stop()  # kopf removes it from the peering on exit: the first resumes
                await a.wait(lambda: "resuming the autoscalers" in a.text(), "the resume")
                await a.wait(lambda: prom_a.queries > queries_a, "the first to query again")
                assert "Traceback" not in a.text() + b.text()
            finally:
                b.stop()
                a.stop()
