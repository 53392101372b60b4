"""Scale to zero and back, closed loop (issue 19): the real `tokenfleet operator` process,
the emulated Kubernetes API with the InferencePool and HTTPRoute CRDs installed, one real
`tokenfleet sim` per replica (tokenfleet.localfleet's kubelet, 120 s cold start), a real
Prometheus, all 10x faster than the wall clock (as test_autoscale_loop.py).

The endpoint picker is a Go program that cannot run here, so its part is emulated by
EmulatedPicker below: a waiting room that holds each request while no engine pod is ready
and sends it on once one is (what llm-d-router's flow control does with an empty pool),
and a /metrics endpoint with the picker's own series names (llm_d_epp_info and
llm_d_epp_flow_control_queue_size, llm-d-router v0.10.0 docs/metrics.md), scraped by the
real Prometheus with the labels the picker's PodMonitor gives them.

One scenario:
1. no traffic: the one replica goes after scaleToZeroAfterSeconds (the idle window
   counted on the operator's clock from its status), and the picker's Routing is True;
2. a request arrives at zero: it waits at the picker, whose queue makes the autoscaler
   order a replica within one decision (counted in the operator's decisions); never back
   to zero while it waits;
3. the replica becomes ready, the request is served, and status shows the cold start the
   request waited.
Every wait polls for a state with a generous timeout; nothing asserts on wall time.
"""

from __future__ import annotations

import asyncio
import re
import time
from pathlib import Path
from typing import Any

import aiohttp.web
import httpx
import pytest

from tests.support.closed_loop import WAIT_S, Loop, status_time
from tokenfleet.localfleet.demo import load_llmservice
from tokenfleet.localfleet.emulated import kmock_cluster
from tokenfleet.localfleet.fleet import FleetOptions, LocalFleet
from tokenfleet.localfleet.pods import target_group
from tokenfleet.localfleet.prometheus import free_port

pytestmark = pytest.mark.system

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "llama-3.1-8b-l4-scale-to-zero.yaml"
TIME_SCALE = 10.0
IDLE_S = 60  # scaleToZeroAfterSeconds for the test (simulated seconds)


class EmulatedPicker:
    """The endpoint picker's waiting room and queue gauge (see the module docstring)."""

    def __init__(self, fleet: LocalFleet, namespace: str, name: str) -> None:
        self.fleet, self.namespace, self.name = fleet, namespace, name
        self.queued = 0
        self.port = free_port()
        self._runner: aiohttp.web.AppRunner | None = None

    async def start(self) -> None:
        app = aiohttp.web.Application()
        app.router.add_get("/metrics", self._metrics)
        self._runner = aiohttp.web.AppRunner(app)
        await self._runner.setup()
        await aiohttp.web.TCPSite(self._runner, "127.0.0.1", self.port).start()
        assert self.fleet.kubelet is not None
        self.fleet.kubelet.add_target(
            target_group(f"127.0.0.1:{self.port}", self.name, self.namespace, f"{self.name}-epp")
        )

    async def close(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()

    async def _metrics(self, _: aiohttp.web.Request) -> aiohttp.web.Response:
        labels = f'fairness_id="default",priority="0",inference_pool="{self.name}"'
        text = (
            "# TYPE llm_d_epp_info gauge\n"
            'llm_d_epp_info{commit="emulated",build_ref="v0.10.0"} 1\n'
            "# TYPE llm_d_epp_flow_control_queue_size gauge\n"
            f"llm_d_epp_flow_control_queue_size{{{labels}}} {self.queued}\n"
        )
        return aiohttp.web.Response(text=text, content_type="text/plain")

    async def request(self, model: str) -> dict[str, Any]:
        """Hold the request until an engine pod is ready, then send it there."""
        assert self.fleet.kubelet is not None
        self.queued += 1
        try:
            while not self.fleet.kubelet.endpoints(self.namespace, self.name):
                await asyncio.sleep(0.1)
        finally:
            self.queued -= 1
        (endpoint, *_) = self.fleet.kubelet.endpoints(self.namespace, self.name)
        body = {"model": model, "prompt": "hello", "max_tokens": 8}
        async with httpx.AsyncClient(timeout=60, trust_env=False) as client:
            response = await client.post(f"{endpoint}/v1/completions", json=body)
        response.raise_for_status()
        return dict(response.json())


def _desired(loop: Loop) -> int | None:
    desired = loop.autoscaling().get("desiredReplicas")
    return None if desired is None else int(desired)


async def test_scale_to_zero_and_back_on_the_pickers_queue(tmp_path: Path) -> None:
    body = load_llmservice(EXAMPLE)
    body["spec"]["autoscaling"]["scaleToZeroAfterSeconds"] = IDLE_S
    async with LocalFleet(tmp_path, FleetOptions(time_scale=TIME_SCALE)) as fleet:
        cluster = kmock_cluster()
        fleet.api.cluster.install(cluster.INFERENCEPOOLS)
        fleet.api.cluster.install(cluster.HTTPROUTES)
        loop = Loop(fleet, body)
        picker = EmulatedPicker(fleet, loop.ns, loop.name)
        await picker.start()
        try:
            await fleet.apply(body)

            def routing() -> dict[str, Any]:
                conditions = (loop.body().get("status") or {}).get("conditions") or []
                return next((c for c in conditions if c["type"] == "Routing"), {})

            await loop.until(lambda: routing().get("status") == "True", "Routing True")
            await loop.until(lambda: loop.ready() >= 1, "the first replica ready")

            # 1. Idle: down to zero, not before the idle window on the operator's clock
            # (its idle clock starts at its first decision, during the cold start).
            first = await loop.until(
                lambda: status_time(loop.autoscaling().get("lastDecisionTime")), "a decision"
            )
            await loop.until(lambda: loop.replicas() == 0, "scaled to zero", timeout=WAIT_S * 2)
            # The operator writes the replicas, then the status of the decision that wrote them:
            # read the status once it has caught up, not the previous decision's.
            await loop.until(lambda: _desired(loop) == 0, "the scale-to-zero decision in status")
            auto = loop.autoscaling()
            assert "scale to zero" in auto["reason"], auto
            idle = re.search(r"no request for (\d+)s", auto["reason"])
            assert idle is not None and int(idle.group(1)) >= IDLE_S, auto
            zero_at = status_time(auto.get("lastScaleTime"))
            assert zero_at is not None and zero_at >= first, auto
            await loop.until(lambda: loop.ready() == 0, "no engine pod left")

            # 2. A request at zero waits at the picker; one replica within one decision.
            before = loop.decisions()
            served = asyncio.create_task(picker.request(body["spec"]["model"]["servedName"]))
            await loop.until(
                lambda: (loop.autoscaling().get("signals") or {}).get("pickerQueued"),
                "the picker's queue seen by the operator",
            )
            await loop.until(lambda: loop.replicas() == 1, "a replica ordered from zero")
            await loop.until(lambda: _desired(loop) == 1, "the scale-from-zero decision in status")
            # One decision to see the queue (Prometheus scrapes, then the tick) and the next
            # at the latest to act: the policy's windows do not apply from zero.
            assert loop.decisions() - before <= 3, loop.autoscaling()
            assert "scale from zero" in loop.autoscaling()["reason"], loop.autoscaling()
            while not served.done():  # never back to zero while the request waits
                assert loop.replicas() >= 1, loop.autoscaling()
                await asyncio.sleep(0.2)
                assert time.monotonic() - loop.started < 10 * WAIT_S, "request never served"

            # 3. Served; status shows the cold start the first request waited.
            answer = served.result()
            assert answer["choices"][0]["text"], answer
            cold = await loop.until(
                lambda: loop.autoscaling().get("coldStartSeconds"), "the cold start in status"
            )
            assert cold >= 60, loop.autoscaling()  # the kubelet's cold start is 120 s
        finally:
            await picker.close()
