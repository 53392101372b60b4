"""The kubelet and ReplicaSet controller of the local fleet.

Every engine Deployment in the emulated API gets one `tokenfleet sim` process per replica
(spec.replicas, as the operator or the autoscaler wrote it). A new pod counts as ready after
the cold start (simulated seconds: image pull, weight loading, CUDA graphs; 120 s by default
as in reference/autoscaling.md's GPU pods) *and* once its /health answers. Then it joins the
endpoints (the Service the load is spread over) and Prometheus' targets with the labels the
PodMonitor gives. The Deployment's status (replicas, readyReplicas, ...) is written back
through the API, so the operator sees it as from the real Deployment controller.

A scale-down removes not-ready pods first, then the newest (the ReplicaSet's order); the pod
leaves the endpoints and the targets at once and its process is stopped after a drain
period, as the rendered preStop sleep lets in-flight requests finish.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import os
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp

from tokenfleet.localfleet import procs
from tokenfleet.localfleet.emulated import DEPLOYMENTS, PODS, EmulatedApi
from tokenfleet.localfleet.pods import (
    EngineDeployment,
    PodSpecError,
    deletion_cost,
    deployment_status,
    engine_deployment,
    foreign_conditions,
    gates_pass,
    pod_manifest,
    pod_status,
    target_group,
)
from tokenfleet.localfleet.prometheus import LocalPrometheus, free_port

log = logging.getLogger("tokenfleet.localfleet")

# Cold start of a GPU engine pod, simulated seconds: reference/autoscaling.md and issue 7's
# autoscale-sim default (image pull + weights + CUDA graphs take minutes).
DEFAULT_COLD_START_S = 120.0
# In-flight requests finish before the process stops (simulated seconds): the rendered
# preStop sleep is 62 s (render/timing.py).
DEFAULT_DRAIN_S = 60.0
TICK_S = 0.2  # wall seconds between passes; well below every scaled interval


@dataclass
class Pod:
    name: str
    namespace: str
    llmservice: str
    args: tuple[str, ...]
    port: int
    process: subprocess.Popen[bytes]
    created: float  # wall clock (monotonic)
    ready: bool = False  # Ready: serving and every readiness gate passed
    serving: bool = False  # the engine container is ready (its /health answered)
    gates: tuple[str, ...] = ()

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def base_url(self) -> str:
        return f"http://{self.address}"


@dataclass
class PodEvent:
    at: float  # wall clock (monotonic)
    pod: str
    what: str  # "created" | "ready" | "deleted" | "failed"


@dataclass
class Kubelet:
    api: EmulatedApi
    prometheus: LocalPrometheus
    workdir: Path
    time_scale: float = 1.0
    cold_start_s: float = DEFAULT_COLD_START_S
    drain_s: float = DEFAULT_DRAIN_S
    pods: dict[tuple[str, str], list[Pod]] = field(default_factory=dict)
    events: list[PodEvent] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    extra_targets: list[dict[str, Any]] = field(default_factory=list)
    _counter: itertools.count[int] = field(default_factory=itertools.count)
    _draining: list[tuple[float, Pod]] = field(default_factory=list)
    _statuses: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)
    _task: asyncio.Task[None] | None = None
    _http: aiohttp.ClientSession | None = None

    # --- what the rest of the harness reads ---------------------------------------------

    def endpoints(self, namespace: str, llmservice: str) -> list[str]:
        """Base URLs of the ready pods of one LLMService (its Service's endpoints)."""
        return [
            pod.base_url
            for (ns, _), pods in self.pods.items()
            if ns == namespace
            for pod in pods
            if pod.ready and pod.llmservice == llmservice
        ]

    def base_urls(self, namespace: str, llmservice: str) -> list[str]:
        """Base URLs of every pod of one LLMService whose process runs (ready or not)."""
        return [
            pod.base_url
            for (ns, _), pods in self.pods.items()
            if ns == namespace
            for pod in pods
            if pod.llmservice == llmservice and pod.process.poll() is None
        ]

    def counts(self, namespace: str, llmservice: str) -> tuple[int, int]:
        """(pods, ready pods) of one LLMService."""
        pods = [
            p
            for (ns, _), ps in self.pods.items()
            if ns == namespace
            for p in ps
            if p.llmservice == llmservice
        ]
        return len(pods), sum(p.ready for p in pods)

    # --- lifecycle ----------------------------------------------------------------------

    async def start(self) -> None:
        self._http = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=2), trust_env=False)
        self._task = asyncio.create_task(self._run(), name="kubelet")

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        every = [p for pods in self.pods.values() for p in pods]
        every += [p for _, p in self._draining]
        await asyncio.gather(*(asyncio.to_thread(procs.stop, p.process) for p in every))
        self.pods.clear()
        self._draining.clear()
        if self._http is not None:
            await self._http.close()

    async def _run(self) -> None:
        while True:
            try:
                await self.sync()
            except asyncio.CancelledError:
                raise
            except Exception as error:  # keep the fleet running; the error is reported
                log.exception("kubelet pass failed")
                self.errors.append(repr(error))
            await asyncio.sleep(TICK_S)

    # --- one pass -----------------------------------------------------------------------

    async def sync(self) -> None:
        wanted: dict[tuple[str, str], EngineDeployment] = {}
        for body in self.api.items(DEPLOYMENTS):
            try:
                engine = engine_deployment(body, self.time_scale)
            except PodSpecError as error:
                if str(error) not in self.errors:
                    self.errors.append(str(error))
                continue
            if engine is not None:
                wanted[engine.namespace, engine.name] = engine
        for key in list(self.pods):
            if key not in wanted:
                for pod in self.pods.pop(key):
                    await self._delete(pod)
        changed = False
        for key, engine in wanted.items():
            changed |= await self._sync_one(key, engine)
        if changed:
            self._publish_targets()
        await self._finish_draining()

    async def _sync_one(self, key: tuple[str, str], engine: EngineDeployment) -> bool:
        pods = self.pods.setdefault(key, [])
        changed = False
        # A changed pod template replaces every pod (Recreate): the sim is sized by it.
        for pod in [p for p in pods if p.args != engine.sim_args]:
            pods.remove(pod)
            await self._delete(pod)
            changed = True
        for pod in list(pods):
            if pod.process.poll() is not None:
                pods.remove(pod)
                await self.api.delete(PODS, pod.namespace, pod.name)
                self._record(pod, "failed")
                self.errors.append(f"pod {pod.name} exited with {pod.process.returncode}")
                changed = True
        while len(pods) < engine.replicas:
            pods.append(await self._create(engine))
        while len(pods) > engine.replicas:
            # The ReplicaSet's order: not-ready pods first, then the lowest
            # pod-deletion-cost (the autoscaler sets it to the requests in flight), then the
            # newest.
            def rank(p: Pod) -> tuple[bool, int, float]:
                cost = deletion_cost(self.api.get(PODS, p.namespace, p.name))
                return (p.ready, cost, -p.created)

            victim = min(pods, key=rank)
            pods.remove(victim)
            await self._delete(victim)
            changed = True
        cold_wall = self.cold_start_s / self.time_scale
        now = time.monotonic()
        for pod in pods:
            if not pod.serving and now - pod.created >= cold_wall and await self._healthy(pod):
                pod.serving = True
            if not pod.serving:
                continue
            current = self.api.get(PODS, pod.namespace, pod.name)
            passes = gates_pass(current, pod.gates)
            status = pod_status(pod.port, passes, True, foreign_conditions(current))
            if passes != pod.ready or not _same_conditions(current, status):
                pod.ready = passes
                await self.api.patch_status(PODS, pod.namespace, pod.name, status)
                self._record(pod, "ready" if passes else "serving")
                changed = True
        ready = sum(p.ready for p in pods)
        status = deployment_status(len(pods), ready, len(pods), engine.generation)
        if self._statuses.get(key) != status:
            await self.api.patch_status(DEPLOYMENTS, key[0], key[1], status)
            self._statuses[key] = status
        return changed

    async def _create(self, engine: EngineDeployment) -> Pod:
        name = f"{engine.name}-{next(self._counter):04d}"
        port = free_port()
        # The pods' filesystem (adapter files under /mnt/adapters/<claim>, ...) is fs/.
        fs = self.workdir / "fs"
        argv = procs.tokenfleet(
            "sim", *engine.sim_args, "--host", "127.0.0.1", "--port", str(port),
            *(("--fs-root", str(fs)) if "--enable-lora" in engine.sim_args else ()),
        )  # fmt: skip
        env = {**os.environ, **dict(engine.env)}
        process = procs.spawn(argv, self.workdir / f"{name}.log", env)
        pod = Pod(
            name=name,
            namespace=engine.namespace,
            llmservice=engine.llmservice,
            args=engine.sim_args,
            port=port,
            process=process,
            created=time.monotonic(),
            gates=engine.readiness_gates,
        )
        await self.api.create(pod_manifest(engine, name, port))
        self._record(pod, "created")
        return pod

    async def _delete(self, pod: Pod) -> None:
        pod.ready = pod.serving = False
        await self.api.delete(PODS, pod.namespace, pod.name)
        self._record(pod, "deleted")
        self._draining.append((time.monotonic() + self.drain_s / self.time_scale, pod))

    async def _finish_draining(self) -> None:
        now = time.monotonic()
        due = [p for t, p in self._draining if t <= now]
        self._draining = [(t, p) for t, p in self._draining if t > now]
        for pod in due:
            await asyncio.to_thread(procs.stop, pod.process)

    async def _healthy(self, pod: Pod) -> bool:
        assert self._http is not None
        try:
            async with self._http.get(f"{pod.base_url}/health") as response:
                return response.status == 200
        except (aiohttp.ClientError, TimeoutError, OSError):
            return False

    def _record(self, pod: Pod, what: str) -> None:
        self.events.append(PodEvent(time.monotonic(), pod.name, what))
        log.info("pod %s/%s %s", pod.namespace, pod.name, what)

    def add_target(self, group: dict[str, Any]) -> None:
        """Scrape one more target besides the engine pods (an emulated endpoint picker)."""
        self.extra_targets.append(group)
        self._publish_targets()

    def _publish_targets(self) -> None:
        self.prometheus.set_targets(
            [
                target_group(p.address, p.llmservice, p.namespace, p.name)
                for pods in self.pods.values()
                for p in pods
                if p.ready
            ]
            + self.extra_targets
        )


def _same_conditions(pod: dict[str, Any] | None, status: dict[str, Any]) -> bool:
    """The pod already carries these conditions (no write needed)."""
    have = {
        (c.get("type"), c.get("status"))
        for c in ((pod or {}).get("status") or {}).get("conditions") or []
    }
    return {(c["type"], c["status"]) for c in status["conditions"]} <= have
