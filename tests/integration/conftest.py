"""Fixtures: a kmock-based apiserver on a loopback port, and the real operator in-process.

The operator logs in exactly as in production (kopf's login -> our Credentials -> the
official client reading $KUBECONFIG), pointed at the emulator by a kubeconfig file.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
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
    def __init__(self, reconciler: Reconciler, task: asyncio.Task[None], stop: asyncio.Event):
        self.reconciler = reconciler
        self.metrics = reconciler.metrics
        self.task = task
        self.stop_flag = stop

    async def stop(self) -> None:
        self.stop_flag.set()
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.wait_for(self.task, timeout=WAIT_SECONDS)


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
            pipeline or default_pipeline(),
        )
        registry = build_registry(reconciler, credentials, Options(**options))
        stop, ready = asyncio.Event(), asyncio.Event()
        task = asyncio.create_task(
            kopf.operator(
                registry=registry,
                standalone=True,
                clusterwide=True,
                stop_flag=stop,
                ready_flag=ready,
            )
        )
        await asyncio.wait_for(ready.wait(), timeout=WAIT_SECONDS)
        handle = RunningOperator(reconciler, task, stop)
        running.append(handle)
        return handle

    logging.getLogger("kopf").setLevel(logging.DEBUG)
    yield start
    for handle in running:
        await handle.stop()


def default_pipeline() -> Pipeline:
    """The real pipeline; render falls back to a stand-in until tokenfleet.render lands."""
    from tokenfleet import api, capacity, render

    render_all = getattr(render, "all", None)
    if render_all is None:
        from stand_in_render import render_all
    return Pipeline(api.parse_llmservice, api.to_plan_request, capacity.plan, render_all)


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
