"""Fixtures: a kmock-based apiserver on a loopback port, and the real operator in-process.

The operator logs in exactly as in production (kopf's login -> our Credentials -> the
official client reading $KUBECONFIG), pointed at the emulator by a kubeconfig file.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import kopf
import pytest
import yaml
from kmock import Server
from kmock_cluster import Cluster

from tokenfleet.controller.handlers import Credentials, Options, build_registry
from tokenfleet.controller.kube import KubeClient
from tokenfleet.controller.metrics import Metrics
from tokenfleet.controller.reconcile import Pipeline, Reconciler

NAMESPACE = "team-a"
WAIT_SECONDS = 30.0


@pytest.fixture
async def cluster(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Cluster]:
    async with Cluster() as api, Server(api) as server:
        kubeconfig = tmp_path / "kubeconfig"
        kubeconfig.write_text(yaml.safe_dump(kubeconfig_for(str(server.url).rstrip("/"))))
        monkeypatch.setenv("KUBECONFIG", str(kubeconfig))
        # The official client reads $KUBECONFIG once, at import; tests set it later.
        import kubernetes.config.kube_config

        monkeypatch.setattr(
            kubernetes.config.kube_config, "KUBE_CONFIG_DEFAULT_LOCATION", str(kubeconfig)
        )
        api.objects["v1/namespaces", None, NAMESPACE] = {"metadata": {"name": NAMESPACE}}
        yield api


def kubeconfig_for(server: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "kmock", "cluster": {"server": server}}],
        "users": [{"name": "tester", "user": {"token": "test-token"}}],
        "contexts": [{"name": "kmock", "context": {"cluster": "kmock", "user": "tester"}}],
        "current-context": "kmock",
    }


class RunningOperator:
    """The operator on its own thread and event loop, as in production: kopf treats every
    task of its loop as its own and cancels them at exit, so it must not share the test's."""

    def __init__(self, reconciler: Reconciler, registry: kopf.OperatorRegistry) -> None:
        self.reconciler = reconciler
        self.metrics = reconciler.metrics
        self.ready = threading.Event()
        self.stop_flag = threading.Event()
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, args=(registry,), daemon=True)

    def _run(self, registry: kopf.OperatorRegistry) -> None:
        try:
            asyncio.run(
                kopf.operator(
                    registry=registry,
                    standalone=True,
                    clusterwide=True,
                    stop_flag=self.stop_flag,
                    ready_flag=self.ready,
                )
            )
        except BaseException as error:  # surfaced by the tests via .error
            self.error = error

    async def start(self) -> None:
        self.thread.start()
        started = await asyncio.to_thread(self.ready.wait, WAIT_SECONDS)
        assert started, f"the operator did not start: {self.error!r}"

    @property
    def alive(self) -> bool:
        return self.thread.is_alive()

    async def stop(self) -> None:
        self.stop_flag.set()
        await asyncio.to_thread(self.thread.join, WAIT_SECONDS)
        assert not self.thread.is_alive(), "the operator did not stop"


StartOperator = Callable[..., Awaitable[RunningOperator]]


@pytest.fixture
async def start_operator(cluster: Cluster) -> AsyncIterator[StartOperator]:
    """Start the real operator (kopf.operator with our registry); stopped at teardown."""
    running: list[RunningOperator] = []

    async def start(pipeline: Pipeline | None = None, **options: Any) -> RunningOperator:
        credentials = Credentials()
        reconciler = Reconciler(
            KubeClient(credentials.current, discovery_ttl=0.5),
            Metrics(),
            pipeline or Pipeline.default(),
        )
        registry = build_registry(reconciler, credentials, Options(**options))
        handle = RunningOperator(reconciler, registry)
        running.append(handle)
        await handle.start()
        return handle

    logging.getLogger("kopf").setLevel(logging.INFO)
    yield start
    for handle in running:
        if handle.alive:
            await handle.stop()


async def eventually(
    check: Callable[[], Any], *, timeout: float = WAIT_SECONDS, what: str = "condition"
) -> Any:
    """Poll until check() returns a truthy value; fail with the last value seen."""
    deadline = asyncio.get_running_loop().time() + timeout
    last: Any = None
    while asyncio.get_running_loop().time() < deadline:
        try:
            last = check()
        except (KeyError, TypeError, IndexError) as error:
            last = error
        if last:
            return last
        await asyncio.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}; last value: {last!r}")
