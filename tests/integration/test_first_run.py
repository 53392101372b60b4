"""The operator's first run against kmock: started with leader election on a cluster without
kopf's peering CRDs, it says so at once, in one line, and keeps saying it until they appear.

Polling with generous timeouts; nothing asserts how long anything took.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import sys
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.support.cluster_objects import create, example
from tests.support.operator_harness import NAMESPACE, RunningOperator, eventually
from tokenfleet.controller.handlers import Credentials, Options, build_registry
from tokenfleet.controller.kube import KubeClient
from tokenfleet.controller.metrics import Metrics
from tokenfleet.controller.peering import PeeringWatch, watch_peering
from tokenfleet.controller.reconcile import Pipeline, Reconciler
from tokenfleet.testing.kmock_cluster import PEERINGS, Cluster

RECHECK_SECONDS = 0.2  # production: 60 s; short here so several repeats are seen


class Lines(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)

    def messages(self, level: int) -> list[str]:
        return [r.getMessage() for r in self.records if r.levelno == level]


@pytest.fixture
def peering_log() -> Iterator[Lines]:
    handler = Lines()
    logger = logging.getLogger("tokenfleet.peering")
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    yield handler
    logger.removeHandler(handler)


async def start_peered(cluster: Cluster) -> tuple[RunningOperator, PeeringWatch]:
    credentials = Credentials()
    kube = KubeClient(credentials.current, discovery_ttl=0.0)
    reconciler = Reconciler(kube, Metrics(), Pipeline.default())
    registry = build_registry(reconciler, credentials, Options())
    watch = watch_peering(registry, kube, "tokenfleet", clusterwide=True, interval=RECHECK_SECONDS)
    operator = RunningOperator(reconciler, registry, peering="tokenfleet", priority=1)
    await operator.start()
    return operator, watch


async def test_missing_peering_crd_is_said_at_once_and_repeated(
    cluster: Cluster, peering_log: Lines
) -> None:
    operator, watch = await start_peered(cluster)
    try:
        errors = await eventually(
            lambda: (
                len(peering_log.messages(logging.ERROR)) >= 3
                and peering_log.messages(logging.ERROR)
            ),
            what="the missing-CRD line, repeated",
        )
        line = errors[0]
        assert "\n" not in line
        assert "clusterkopfpeerings.kopf.dev is not installed" in line
        assert "no LLMService is reconciled" in line
        assert "charts/tokenfleet/crds/" in line and "--standalone" in line
        assert len(set(errors)) == 1  # the same line each time, not a growing story
        assert watch.missing is True

        cluster.install(PEERINGS)
        await eventually(lambda: watch.missing is False, what="the CRD to be noticed")
        assert any("leader election resumes" in m for m in peering_log.messages(logging.INFO))
        said = len(peering_log.messages(logging.ERROR))
        # Once installed the watch has ended: no further error lines, whatever the wait.
        await eventually(lambda: watch._task is not None and watch._task.done(), what="end")
        assert len(peering_log.messages(logging.ERROR)) == said
    finally:
        await operator.stop()


async def test_installed_peering_crd_says_nothing(cluster: Cluster, peering_log: Lines) -> None:
    cluster.install(PEERINGS)
    operator, watch = await start_peered(cluster)
    try:
        await eventually(lambda: watch.missing is False, what="the check")
        assert peering_log.messages(logging.ERROR) == []
    finally:
        await operator.stop()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def test_tokenfleet_operator_with_no_flags_says_what_is_missing(cluster: Cluster) -> None:
    """The real command, as a user starts it (only its ports moved off 8080 / 9090), with
    $KUBECONFIG pointing at kmock, which serves no peering CRD."""
    health = f"http://127.0.0.1:{_free_port()}/healthz"
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "tokenfleet.cli", "operator",
        "--liveness", health, "--metrics-port", str(_free_port()),
        stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    seen: list[str] = []
    try:
        assert process.stderr is not None
        deadline = asyncio.get_running_loop().time() + 60
        while not any("is not installed" in line for line in seen):
            assert asyncio.get_running_loop().time() < deadline, seen
            raw = await asyncio.wait_for(process.stderr.readline(), timeout=60)
            assert raw, f"the operator exited: {seen}"
            seen.append(raw.decode().rstrip())
        line = next(line for line in seen if "is not installed" in line)
        assert "[ERROR" in line and "--standalone" in line and "charts/tokenfleet/crds/" in line
        assert not any("Traceback" in s for s in seen)
        async with httpx.AsyncClient() as client:
            body = await eventually_async(lambda: client.get(health))
        assert body.status_code == 200  # alive and logged in; the wait is explained in it
        probes = body.json()
        assert probes["kubernetes"] == "logged in"
        assert probes["peering"].startswith("waiting")
    finally:
        process.terminate()
        await asyncio.wait_for(process.wait(), timeout=60)


async def test_tokenfleet_operator_on_named_namespaces_sends_nothing_cluster_wide(
    cluster: Cluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The real command as the chart runs it with watchNamespaces (a Role per namespace):
    every request it sends names the watched namespace, and it reconciles there."""
    outside: list[str] = []
    original = Cluster._handle

    async def handle(self: Cluster, request: Any) -> Any:
        res = request.resource
        resource_request = res is not None and res.plural and request.action is not None
        if resource_request and request.namespace != NAMESPACE:
            outside.append(f"{request.method.value} {res.plural} in {request.namespace}")
        return await original(self, request)

    monkeypatch.setattr(Cluster, "_handle", handle)
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "tokenfleet.cli", "operator", "--standalone",
        "--namespace", NAMESPACE, "--liveness", "", "--metrics-port", str(_free_port()),
        stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL,
    )  # fmt: skip
    try:
        await create(cluster, example("llama-3.1-8b-l4.yaml"))
        await eventually(
            lambda: cluster.get("apps/v1/deployments", NAMESPACE, "llama-3-1-8b"),
            timeout=60,
            what="the Deployment in the watched namespace",
        )
        assert process.returncode is None, "the operator exited"
        assert not outside, outside
    finally:
        process.terminate()
        await asyncio.wait_for(process.wait(), timeout=60)


async def eventually_async(get: Any) -> Any:
    deadline = asyncio.get_running_loop().time() + 30
    while True:
        try:
            return await get()
        except httpx.TransportError:
            assert asyncio.get_running_loop().time() < deadline
            await asyncio.sleep(0.1)
