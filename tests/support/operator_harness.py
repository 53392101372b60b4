"""Helpers shared by the integration tests and the benchmark: the operator on its own
thread, a kubeconfig pointing at the emulator, and a polling wait (no timing asserts)."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable
from typing import Any

import kopf

from tokenfleet.controller.reconcile import Reconciler

NAMESPACE = "team-a"
WAIT_SECONDS = 30.0


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

    def __init__(
        self,
        reconciler: Reconciler,
        registry: kopf.OperatorRegistry,
        peering: str | None = None,
        priority: int = 0,
        liveness: str | None = None,
        namespaces: list[str] | None = None,
    ) -> None:
        self.peering = peering
        self.namespaces = namespaces  # None: cluster-wide (the default), else these only
        self.priority = priority
        self.liveness = liveness  # kopf's /healthz URL, as `tokenfleet operator --liveness`
        self.reconciler = reconciler
        self.metrics = reconciler.metrics
        self.drift: Any = None  # the Drift of its registry, when the fixture passed one
        self.ready = threading.Event()
        self.stop_flag = threading.Event()
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, args=(registry,), daemon=True)

    def _run(self, registry: kopf.OperatorRegistry) -> None:
        try:
            asyncio.run(
                kopf.operator(
                    registry=registry,
                    standalone=self.peering is None,
                    peering_name=self.peering,
                    priority=self.priority,
                    clusterwide=self.namespaces is None,
                    namespaces=self.namespaces or (),
                    stop_flag=self.stop_flag,
                    ready_flag=self.ready,
                    liveness_endpoint=self.liveness,
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
            last = error  # not there yet (an exception is truthy: never a success)
        else:
            if last:
                return last
        await asyncio.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}; last value: {last!r}")
