"""Read-only views of one LLMService in a closed loop on a local fleet (the real operator
against the emulated API, simulators as replicas, a real Prometheus), shared by the system
tests that drive such a loop and wait for its states."""

from __future__ import annotations

import asyncio
import datetime
import time
from collections.abc import Callable
from typing import Any

import httpx

from tokenfleet.localfleet.fleet import LocalFleet
from tokenfleet.localfleet.observe import Observer, Slo

# Wall-clock bounds for each wait: failure bounds, generous for a busy 2-core machine (each
# stage needs a few simulated minutes, i.e. well under 30 wall seconds at 10x).
WAIT_S = 90.0


def status_time(text: str | None) -> float | None:
    """Unix seconds of a status timestamp (RFC 3339, as the operator writes it)."""
    if not text:
        return None
    return (
        datetime.datetime.strptime(text, "%Y-%m-%dT%H:%M:%SZ")
        .replace(tzinfo=datetime.UTC)
        .timestamp()
    )


def progress(what: str, loop: Loop) -> None:
    """One line per stage (pytest -s shows them): where a slow run spent its time."""
    print(
        f"[{time.monotonic() - loop.started:6.1f} s wall] {what}: replicas "
        f"{loop.ready()}/{loop.replicas()}, {loop.autoscaling().get('reason', '')[:100]}",
        flush=True,
    )


class Loop:
    """Read-only views of the one LLMService under test."""

    def __init__(self, fleet: LocalFleet, body: dict[str, Any]) -> None:
        self.fleet = fleet
        self.ns = body["metadata"]["namespace"]
        self.name = body["metadata"]["name"]
        self.slo = Slo.of(body)
        self.observer = Observer(fleet, self.ns, self.name, self.slo)
        self.started = time.monotonic()

    def body(self) -> dict[str, Any]:
        return self.fleet.llmservice(self.ns, self.name) or {}

    def replicas(self) -> int:
        return int(self.body()["spec"].get("replicas", 1))

    def ready(self) -> int:
        return int((self.body().get("status") or {}).get("readyReplicas") or 0)

    def autoscaling(self) -> dict[str, Any]:
        return dict((self.body().get("status") or {}).get("autoscaling") or {})

    def condition(self) -> dict[str, Any]:
        for cond in (self.body().get("status") or {}).get("conditions") or []:
            if cond.get("type") == "Autoscaling":
                return dict(cond)
        return {}

    def decisions(self) -> float:
        """tokenfleet_autoscaler_decisions_total for this LLMService (the operator's own
        metrics endpoint): how many times it decided, whatever the wall clock did."""
        assert self.fleet.operator is not None
        text = httpx.get(
            f"http://127.0.0.1:{self.fleet.operator.metrics_port}/metrics", timeout=10
        ).text
        total = 0.0
        for line in text.splitlines():
            if line.startswith("tokenfleet_autoscaler_decisions_total{") and (
                f'llmservice="{self.name}"' in line
            ):
                total += float(line.rsplit(" ", 1)[1])
        return total

    async def until(self, check: Callable[[], Any], what: str, timeout: float = WAIT_S) -> Any:
        deadline = time.monotonic() + timeout
        last: Any = None
        while time.monotonic() < deadline:
            operator = self.fleet.operator
            assert operator is not None and operator.alive, (
                f"the operator exited:\n{operator.log_tail() if operator else ''}"
            )
            assert self.fleet.kubelet is not None and not self.fleet.kubelet.errors, (
                self.fleet.kubelet.errors if self.fleet.kubelet else None
            )
            if self.fleet.load is not None:
                self.fleet.load.check()
            last = await asyncio.to_thread(check)
            if last:
                return last
            await asyncio.sleep(0.2)
        operator = self.fleet.operator
        raise AssertionError(
            f"timed out waiting for {what}; last: {last!r}; status.autoscaling: "
            f"{self.autoscaling()}; condition: {self.condition()}; operator log: "
            f"{operator.log_tail(20000) if operator else ''}"
        )
