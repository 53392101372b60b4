"""Start the local fleet in order, stop everything it started in reverse order.

    async with LocalFleet(workdir, time_scale=10) as fleet:
        await fleet.apply(llmservice_body)
        fleet.load.rate = 1.2          # simulated requests per second
        ...

Order: emulated API -> Prometheus -> operator process -> kubelet (sims) -> load. Every
process is a child started in its own session and dies with the harness (procs.py);
`close()` stops them all, and the demo calls it on Ctrl-C / SIGTERM too.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tokenfleet.api.spec import API_VERSION, PLURAL
from tokenfleet.bench.dataset import DatasetSpec
from tokenfleet.localfleet.emulated import EmulatedApi
from tokenfleet.localfleet.kubelet import DEFAULT_COLD_START_S, Kubelet
from tokenfleet.localfleet.load import LoadGenerator
from tokenfleet.localfleet.operator import OperatorProcess
from tokenfleet.localfleet.prometheus import LocalPrometheus

LLMSERVICES = f"{API_VERSION}/{PLURAL}"
# Prometheus scrapes every 10 simulated seconds (the PodMonitor renders 15 s; a little
# faster keeps a 1-minute rate window at 6+ samples), and never below 0.25 wall seconds.
SCRAPE_INTERVAL_SIM_S = 10.0
MIN_SCRAPE_WALL_S = 0.25
START_TIMEOUT_S = 60.0


@dataclass(frozen=True)
class FleetOptions:
    time_scale: float = 1.0
    cold_start_s: float = DEFAULT_COLD_START_S  # simulated seconds
    scrape_interval_s: float = SCRAPE_INTERVAL_SIM_S  # simulated seconds
    seed: int = 0


class LocalFleet:
    def __init__(self, workdir: Path, options: FleetOptions | None = None) -> None:
        self.workdir = workdir
        self.options = options or FleetOptions()
        k = self.options.time_scale
        workdir.mkdir(parents=True, exist_ok=True)
        self.api = EmulatedApi(workdir)
        self.prometheus = LocalPrometheus(
            workdir / "prometheus", max(self.options.scrape_interval_s / k, MIN_SCRAPE_WALL_S)
        )
        self.operator: OperatorProcess | None = None
        self.kubelet: Kubelet | None = None
        self.load: LoadGenerator | None = None
        self.started = time.monotonic()
        self._closed = False

    async def __aenter__(self) -> LocalFleet:
        try:
            await self.start()
        except BaseException:
            await self.close()
            raise
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def start(self) -> None:
        await self.api.__aenter__()
        await asyncio.to_thread(self.prometheus.start)
        self.operator = OperatorProcess(
            self.workdir, self.api.kubeconfig, self.prometheus.url, self.options.time_scale
        )
        self.operator.start()
        await self._wait_operator_watching()
        self.kubelet = Kubelet(
            api=self.api,
            prometheus=self.prometheus,
            workdir=self.workdir,
            time_scale=self.options.time_scale,
            cold_start_s=self.options.cold_start_s,
        )
        await self.kubelet.start()
        self.started = time.monotonic()

    async def _wait_operator_watching(self) -> None:
        assert self.operator is not None
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if not self.operator.alive:
                raise RuntimeError(f"the operator exited:\n{self.operator.log_tail()}")
            if any(
                "llmservices" in r.url.path and "watch=" in r.url.query_string
                for r in list(self.api.cluster._requests)
            ):
                return
            await asyncio.sleep(0.1)
        raise RuntimeError(f"the operator did not start watching:\n{self.operator.log_tail()}")

    async def apply(self, body: dict[str, Any]) -> dict[str, Any]:
        """Create the LLMService (as `kubectl create -f`)."""
        return await self.api.create(body)

    def llmservice(self, namespace: str, name: str) -> dict[str, Any] | None:
        return self.api.get(LLMSERVICES, namespace, name)

    async def start_load(
        self,
        namespace: str,
        llmservice: str,
        model: str,
        dataset: DatasetSpec,
        schedule: Callable[[float], float] | None = None,
        end_s: float = math.inf,
    ) -> LoadGenerator:
        """The load, from now on: at `schedule` (simulated req/s at each simulated second)
        until `end_s`, or at the rate the caller sets on the generator."""
        assert self.kubelet is not None
        kubelet = self.kubelet
        endpoints: Callable[[], list[str]] = lambda: kubelet.endpoints(namespace, llmservice)  # noqa: E731
        self.load = LoadGenerator(
            endpoints=endpoints,
            model=model,
            dataset=dataset,
            time_scale=self.options.time_scale,
            seed=self.options.seed,
            schedule=schedule,
            end_s=end_s,
        )
        await self.load.start()
        self.started = time.monotonic()  # the view's clock starts with the load
        return self.load

    def sim_seconds(self, wall_since_start: float | None = None) -> float:
        """Simulated seconds since the fleet started (or of a wall-clock duration)."""
        wall = time.monotonic() - self.started if wall_since_start is None else wall_since_start
        return wall * self.options.time_scale

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self.load is not None:
            with contextlib.suppress(Exception):
                await self.load.close()
        if self.kubelet is not None:
            with contextlib.suppress(Exception):
                await self.kubelet.close()
        if self.operator is not None:
            await asyncio.to_thread(self.operator.stop)
        await asyncio.to_thread(self.prometheus.close)
        with contextlib.suppress(Exception):
            await self.api.__aexit__(None, None, None)
