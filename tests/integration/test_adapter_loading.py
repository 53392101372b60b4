"""LoRA adapters loaded and unloaded at runtime, against the real operator and simulators.

The real `tokenfleet operator` process on the emulated Kubernetes API, and one real
`tokenfleet sim` per engine pod (tokenfleet.localfleet's kubelet, honouring readiness gates),
all 10x faster than the wall clock. The adapters' files live on a PersistentVolumeClaim
(pvc://loras/...); the kubelet gives the sims the pods' filesystem under <workdir>/fs.

One scenario, in order:
1. two replicas, adapters `sql` (its files there) and `chat` (not yet): every pod loads
   `sql`, refuses `chat` (the engine's own 404), and stays out of service (its readiness
   gate False); status.adapters says Loaded 2 of 2 for sql and Failed, with the pod and the
   engine's answer, for chat;
2. the chat files appear: the next retry loads them, the pods turn Ready;
3. an adapter added to the spec is loaded on the running pods, none restarts;
4. an adapter removed from the spec is unloaded, none restarts;
and through all of it the base model answers, the Deployment's pod template never changes,
and no pod is created or deleted after the first two.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from tokenfleet.localfleet.emulated import DEPLOYMENTS, EmulatedApi
from tokenfleet.localfleet.kubelet import Kubelet
from tokenfleet.localfleet.operator import OperatorProcess
from tokenfleet.localfleet.prometheus import LocalPrometheus

NAMESPACE = "default"
NAME = "chat-8b"
TIME_SCALE = 10.0
WAIT_S = 90.0
LLMS_PATH = f"/apis/tokenfleet.dev/v1alpha1/namespaces/{NAMESPACE}/llmservices/{NAME}"
MERGE = {"Content-Type": "application/merge-patch+json"}


def adapter(name: str) -> dict[str, Any]:
    return {"name": name, "source": f"pvc://loras/{name}", "rank": 8}


def body(adapters: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "apiVersion": "tokenfleet.dev/v1alpha1",
        "kind": "LLMService",
        "metadata": {"name": NAME, "namespace": NAMESPACE},
        "spec": {
            "model": {"id": "meta-llama/Llama-3.1-8B", "servedName": "base"},
            "gpu": {"type": "l4", "count": 1},
            "workload": {"maxModelLen": 8192},
            "replicas": 2,
            "lora": {"maxLoras": 4, "maxRank": 16},
            "adapters": adapters,
        },
    }


def write_adapter(fs: Path, name: str) -> None:
    target = fs / "mnt" / "adapters" / "loras" / name
    target.mkdir(parents=True, exist_ok=True)
    (target / "adapter_config.json").write_text(json.dumps({"r": 8, "peft_type": "LORA"}))


async def eventually(check: Callable[[], Any], what: str, timeout: float = WAIT_S) -> Any:
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        try:
            last = check()
        except (KeyError, TypeError, IndexError, AttributeError) as error:
            last = error
        else:
            if last:
                return last
        await asyncio.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}; last value: {last!r}")


class Fleet:
    def __init__(self, api: EmulatedApi, kubelet: Kubelet, operator: OperatorProcess) -> None:
        self.api, self.kubelet, self.operator = api, kubelet, operator

    def llms(self) -> dict[str, Any]:
        found = self.api.get("tokenfleet.dev/v1alpha1/llmservices", NAMESPACE, NAME)
        assert found is not None
        return found

    def adapters(self) -> dict[str, dict[str, Any]]:
        return {a["name"]: a for a in (self.llms().get("status") or {}).get("adapters") or []}

    def pods(self) -> list[Any]:
        return [p for pods in self.kubelet.pods.values() for p in pods]

    def template(self) -> str:
        deployment = self.api.get(DEPLOYMENTS, NAMESPACE, NAME)
        assert deployment is not None
        return json.dumps(deployment["spec"]["template"], sort_keys=True)

    async def patch(self, patch: dict[str, Any]) -> None:
        response = await self.api.cluster.patch(LLMS_PATH, json=patch, headers=MERGE)
        assert response.status < 300, response.status


@pytest.fixture
async def fleet(tmp_path: Path) -> AsyncIterator[Fleet]:
    async with EmulatedApi(tmp_path) as api:
        prometheus = LocalPrometheus(tmp_path / "prometheus", 1.0)  # targets only, not run
        prometheus.workdir.mkdir(parents=True)
        operator = OperatorProcess(tmp_path, api.kubeconfig, prometheus.url, TIME_SCALE)
        operator.start()
        kubelet = Kubelet(
            api=api, prometheus=prometheus, workdir=tmp_path, time_scale=TIME_SCALE,
            cold_start_s=10.0, drain_s=10.0,
        )  # fmt: skip
        try:
            await eventually(
                lambda: (
                    operator.alive
                    and any("watch=" in r.url.query_string for r in list(api.cluster._requests))
                ),
                "the operator watching",
                timeout=60,
            )
            await kubelet.start()
            yield Fleet(api, kubelet, operator)
        finally:
            with contextlib.suppress(Exception):
                await kubelet.close()
            await asyncio.to_thread(operator.stop)
            print(operator.log_tail(6000))


def models(url: str) -> set[str]:
    listing = httpx.get(f"{url}/v1/models", timeout=5).json()
    return {m["id"] for m in listing["data"] if m.get("parent")}


def complete(url: str, model: str) -> int:
    request = {"model": model, "prompt": "hello", "max_tokens": 2}
    return httpx.post(f"{url}/v1/completions", json=request, timeout=30).status_code


async def test_adapters_load_retry_add_and_remove_without_restarting_a_pod(
    fleet: Fleet, tmp_path: Path
) -> None:
    fs = tmp_path / "fs"
    write_adapter(fs, "sql")
    await fleet.api.create(body([adapter("sql"), adapter("chat")]))

    # 1. chat's files are missing: its load fails on every pod and is retried; the pods
    # serve (their engines run) but stay out of the endpoints (the gate).
    await eventually(lambda: len(fleet.pods()) == 2 and all(p.serving for p in fleet.pods()),
                     "two serving pods")  # fmt: skip
    failed = await eventually(
        lambda: (
            (a := fleet.adapters().get("chat"))
            and a["state"] == "Failed"
            and a["replicas"] == 2
            and a
        ),
        "chat reported Failed on both pods",
    )
    assert "No adapter found for /mnt/adapters/loras/chat" in failed["message"]
    assert "retrying in" in failed["message"] and "pod chat-8b-" in failed["message"]
    assert (failed["loadedReplicas"], failed["replicas"]) == (0, 2)
    sql = await eventually(
        lambda: (
            (a := fleet.adapters().get("sql"))
            and a["state"] == "Loaded"
            and a["replicas"] == 2
            and a
        ),
        "sql Loaded",
    )
    assert (sql["loadedReplicas"], sql["replicas"]) == (2, 2)
    assert fleet.kubelet.counts(NAMESPACE, NAME) == (2, 0), "no pod may be Ready without chat"
    first = {p.name: p.process.pid for p in fleet.pods()}
    template = fleet.template()
    attempts = failed["message"]

    # ... and retried: the attempt count in the message grows while the file is missing.
    await eventually(lambda: fleet.adapters()["chat"]["message"] != attempts, "a retry of chat")

    # 2. the files appear: the next retry loads them and both pods turn Ready.
    write_adapter(fs, "chat")
    await eventually(lambda: fleet.adapters()["chat"]["state"] == "Loaded", "chat Loaded")
    await eventually(lambda: fleet.kubelet.counts(NAMESPACE, NAME) == (2, 2), "pods Ready")
    urls = [p.base_url for p in fleet.pods()]
    for url in urls:
        assert models(url) == {"sql", "chat"}
        assert complete(url, "chat") == 200
        assert complete(url, "base") == 200

    # 3. an adapter added to the spec loads on the running pods.
    write_adapter(fs, "summary")
    await fleet.patch({"spec": {"adapters": [adapter("sql"), adapter("chat"), adapter("summary")]}})
    await eventually(
        lambda: (a := fleet.adapters().get("summary")) and a["state"] == "Loaded",
        "summary Loaded",
    )
    for url in urls:
        assert "summary" in models(url)
        assert complete(url, "summary") == 200

    # 4. an adapter removed from the spec is unloaded; status stops listing it.
    await fleet.patch({"spec": {"adapters": [adapter("chat"), adapter("summary")]}})
    await eventually(lambda: all(models(url) == {"chat", "summary"} for url in urls),
                     "sql unloaded")  # fmt: skip
    await eventually(lambda: set(fleet.adapters()) == {"chat", "summary"}, "status without sql")
    for url in urls:
        assert complete(url, "sql") == 404  # the engine's "model does not exist"
        assert complete(url, "base") == 200

    # Nothing else moved: the same two pods (same processes), the same pod template, every
    # pod Ready, none deleted or created since the first two.
    assert {p.name: p.process.pid for p in fleet.pods()} == first
    assert fleet.template() == template
    assert fleet.kubelet.counts(NAMESPACE, NAME) == (2, 2)
    assert not [e for e in fleet.kubelet.events if e.what in ("deleted", "failed")]
    assert len([e for e in fleet.kubelet.events if e.what == "created"]) == 2
    conditions = {c["type"]: c["status"] for c in fleet.llms()["status"]["conditions"]}
    assert conditions.get("Degraded") == "False"
