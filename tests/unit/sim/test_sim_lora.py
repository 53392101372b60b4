"""The simulator's LoRA adapters in-process: endpoints, requests, series and step cost.

The answers are the engines' (sim/lora.py names the source); the system test
test_lora_sim_vs_real_vllm.py holds the vLLM half against a real engine.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.support.sim_app import CONFIG, FLAT, ManualClock, sim_clients
from tests.support.sim_app import Client as SimClient
from tokenfleet.scheduling.core import Scheduler, SimRequest
from tokenfleet.sim.lora import Adapters, LoraSettings, LoraTimer
from tokenfleet.sim.server import SimSettings

Client = Callable[..., Any]


def adapter_dir(root: Path, name: str, rank: int) -> Path:
    path = root / "adapters" / name
    path.mkdir(parents=True)
    (path / "adapter_config.json").write_text(json.dumps({"r": rank}))
    return path


@pytest.fixture
async def client(tmp_path: Path) -> AsyncIterator[Callable[..., Any]]:
    async with sim_clients() as start:

        async def make(engine: str = "vllm", **lora: Any) -> SimClient:
            settings = SimSettings(
                served_model="base", engine=engine, config=CONFIG, time_scale=1000.0,
                lora=LoraSettings(**{"slots": 2, "max_rank": 16, **lora}),
            )  # fmt: skip
            return await start(settings, ManualClock())

        yield make


async def test_vllm_load_list_use_unload(client: Client, tmp_path: Path) -> None:
    c = await client()
    good = str(adapter_dir(tmp_path, "sql", 8))
    load = "/v1/load_lora_adapter"
    r = await c.post(load, json={"lora_name": "sql", "lora_path": good})
    assert (r.status, await r.text()) == (200, "Success: LoRA adapter 'sql' added successfully.")
    r = await c.post(load, json={"lora_name": "sql", "lora_path": good})
    assert r.status == 400 and (await r.json())["error"]["type"] == "InvalidUserInput"
    r = await c.post(load, json={"lora_name": "x", "lora_path": str(tmp_path / "none")})
    assert r.status == 404
    assert (await r.json())["error"]["message"] == (
        f"Loading lora x failed: No adapter found for {tmp_path / 'none'}"
    )
    big = str(adapter_dir(tmp_path, "big", 64))
    r = await c.post(load, json={"lora_name": "big", "lora_path": big})
    assert r.status == 500
    assert "LoRA rank 64 is greater than max_lora_rank 16" in (await r.json())["error"]["message"]
    models = (await (await c.get("/v1/models")).json())["data"]
    assert [(m["id"], m["parent"], m["root"]) for m in models] == [
        ("base", None, "base"), ("sql", "base", good)
    ]  # fmt: skip
    r = await c.post("/v1/completions", json={"model": "sql", "prompt": "hi", "max_tokens": 2})
    assert r.status == 200 and (await r.json())["model"] == "sql"
    metrics = await (await c.get("/metrics")).text()
    info = next(
        f for f in text_string_to_metric_families(metrics) if f.name == "vllm:lora_requests_info"
    )
    assert {frozenset(s.labels) for s in info.samples} == {
        frozenset({"max_lora", "running_lora_adapters", "waiting_lora_adapters"})
    }
    assert any(s.labels["running_lora_adapters"] == "sql" for s in info.samples)
    assert {s.labels["max_lora"] for s in info.samples} == {"2"}
    r = await c.post("/v1/unload_lora_adapter", json={"lora_name": "sql"})
    assert r.status == 200
    r = await c.post("/v1/unload_lora_adapter", json={"lora_name": "sql"})
    assert r.status == 404
    r = await c.post("/v1/completions", json={"model": "sql", "prompt": "hi", "max_tokens": 2})
    assert r.status == 404


async def test_vllm_without_the_runtime_switch_has_no_endpoints(client: Client) -> None:
    c = await client(runtime_updates=False)
    r = await c.post("/v1/load_lora_adapter", json={"lora_name": "a", "lora_path": "org/a"})
    assert r.status == 404  # no such route, as vLLM without VLLM_ALLOW_RUNTIME_LORA_UPDATING


async def test_static_adapters_and_the_pods_filesystem(client: Client, tmp_path: Path) -> None:
    adapter_dir(tmp_path / "mnt", "chat", 8)
    c = await client(fs_root=tmp_path, static=(("chat", "/mnt/adapters/chat"),))
    models = (await (await c.get("/v1/models")).json())["data"]
    assert [m["id"] for m in models] == ["base", "chat"]


async def test_sglang_load_pinning_and_base_colon_adapter(client: Client, tmp_path: Path) -> None:
    c = await client(engine="sglang", slots=1)
    a, b = str(adapter_dir(tmp_path, "a", 8)), str(adapter_dir(tmp_path, "b", 8))
    r = await c.post("/load_lora_adapter", json={"lora_name": "a", "lora_path": a, "pinned": True})
    body = await r.json()
    assert r.status == 200 and body["success"] is True and body["loaded_adapters"] == {"a": a}
    # pinned adapters may not take every adapter slot (the base model's stays free)
    r = await c.post("/load_lora_adapter", json={"lora_name": "b", "lora_path": b, "pinned": True})
    body = await r.json()
    assert r.status == 400 and "not allowed to pin all slots" in body["error_message"]
    r = await c.post("/load_lora_adapter", json={"lora_name": "a", "lora_path": a})
    assert r.status == 400 and "already loaded" in (await r.json())["error_message"]
    r = await c.post("/v1/completions", json={"model": "base:a", "prompt": "x", "max_tokens": 2})
    assert r.status == 200
    r = await c.post("/v1/completions", json={"model": "base:b", "prompt": "x", "max_tokens": 2})
    assert r.status == 400
    metrics = await (await c.get("/metrics")).text()
    assert "sglang:lora_pool_slots_total" in metrics


def test_steps_with_adapter_requests_pay_the_lora_kernels() -> None:
    adapters = Adapters(
        "vllm", "base", LoraSettings(slots=4, static=(("a", "org/a"), ("b", "org/b")))
    )
    timer = LoraTimer(FLAT, adapters, fixed_s=0.002, per_adapter_s=0.0005)
    scheduler = Scheduler(replace(CONFIG), timer)
    timer.scheduler = scheduler
    plain = FLAT.step_seconds(0, 1, 100)
    requests = [SimRequest(f"r{i}", 10, 5, 0.0) for i in range(3)]
    for request in requests:
        scheduler.add(request)
    scheduler.running = list(requests)
    assert timer.step_seconds(0, 3, 300) == pytest.approx(FLAT.step_seconds(0, 3, 300))
    adapters.tag(requests[0], "a")
    adapters.tag(requests[1], "b")
    adapters.tag(requests[2], "a")
    assert timer.step_seconds(0, 1, 100) == pytest.approx(plain + 0.002 + 2 * 0.0005)
