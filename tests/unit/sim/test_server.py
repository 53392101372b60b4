"""The simulator's HTTP server in-process (aiohttp test client), on a manual clock.

The engine's clock advances only when the engine sleeps through a step (ManualClock), so
simulated latencies are exact step sums whatever the machine's load: no test here depends on
wall-clock time.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.support.sim_app import CONFIG, FLAT, Client, ManualClock, sim_clients
from tokenfleet.sim.server import SimSettings


def settings(engine: str = "vllm", seed: int = 0) -> SimSettings:
    return SimSettings(
        served_model="sim-model", engine=engine, config=CONFIG, time_scale=1000.0, seed=seed
    )


ClientFactory = Callable[..., Any]


@pytest.fixture
async def make_client() -> AsyncIterator[ClientFactory]:
    async with sim_clients() as start:

        async def make(s: SimSettings | None = None, real_clock: bool = False) -> Client:
            return await start(s or settings(), None if real_clock else ManualClock())

        yield make


def sse_events(raw: str) -> list[str]:
    return [line[len("data: ") :] for line in raw.splitlines() if line.startswith("data: ")]


async def test_models_and_health(make_client: ClientFactory) -> None:
    client = await make_client()
    assert (await client.get("/health")).status == 200
    body = await (await client.get("/v1/models")).json()
    assert [m["id"] for m in body["data"]] == ["sim-model"]
    assert body["data"][0]["max_model_len"] == 1024


@pytest.mark.parametrize(
    ("path", "payload", "prompt_tokens"),
    [
        ("/v1/completions", {"prompt": "one two three"}, 4),  # "three" is 2 tokens
        ("/v1/completions", {"prompt": [1, 2, 3, 4, 5]}, 5),
        ("/v1/completions", {"prompt": ["internationalization"]}, 5),
        ("/v1/chat/completions", {"messages": [{"role": "user", "content": "hi"}]}, 8),
    ],
)
async def test_non_streaming_generates_max_tokens(
    make_client: ClientFactory, path: str, payload: dict[str, Any], prompt_tokens: int
) -> None:
    client = await make_client()
    response = await client.post(path, json={"model": "sim-model", "max_tokens": 7, **payload})
    assert response.status == 200
    body = await response.json()
    assert body["usage"] == {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": 7,
        "total_tokens": prompt_tokens + 7,
    }
    choice = body["choices"][0]
    text = choice["message"]["content"] if "message" in choice else choice["text"]
    assert len(text.split()) == 7
    assert choice["finish_reason"] == "length"


@pytest.mark.parametrize("chat", [False, True])
@pytest.mark.parametrize("include_usage", [False, True])
async def test_streaming_chunks(
    make_client: ClientFactory, chat: bool, include_usage: bool
) -> None:
    client = await make_client()
    path = "/v1/chat/completions" if chat else "/v1/completions"
    payload: dict[str, Any] = {"max_tokens": 5, "stream": True}
    payload |= {"messages": [{"role": "user", "content": "x"}]} if chat else {"prompt": "x"}
    if include_usage:
        payload["stream_options"] = {"include_usage": True}
    response = await client.post(path, json=payload)
    assert response.headers["Content-Type"].startswith("text/event-stream")
    events = sse_events(await response.text())
    assert events[-1] == "[DONE]"
    chunks = [json.loads(e) for e in events[:-1]]
    if include_usage:
        usage = chunks.pop()
        assert usage["choices"] == [] and usage["usage"]["completion_tokens"] == 5
    if chat:
        opening = chunks.pop(0)
        assert opening["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    assert len(chunks) == 5
    finishes = [c["choices"][0]["finish_reason"] for c in chunks]
    assert finishes == [None] * 4 + ["length"]
    assert all("usage" not in c for c in chunks)


@pytest.mark.parametrize(
    ("engine", "payload", "status", "err_type", "param"),
    [
        ("vllm", {"model": "other", "prompt": "a"}, 404, "NotFoundError", "model"),
        ("vllm", {"prompt": [1] * 1025}, 400, "BadRequestError", "input_tokens"),
        ("vllm", {"prompt": [1] * 1024, "max_tokens": 3}, 400, "BadRequestError", "max_tokens"),
        ("vllm", {"prompt": "a", "max_tokens": 2000}, 400, "BadRequestError", "max_tokens"),
        ("vllm", {"prompt": {"x": 1}}, 400, "BadRequestError", "prompt"),
        ("sglang", {"model": "other", "prompt": "a"}, 404, "NotFoundError", "model"),
    ],
)
async def test_errors_have_the_engine_shape(
    make_client: ClientFactory,
    engine: str,
    payload: dict[str, Any],
    status: int,
    err_type: str,
    param: str,
) -> None:
    client = await make_client(settings(engine))
    response = await client.post("/v1/completions", json=payload)
    assert response.status == status
    body = await response.json()
    error = body["error"] if engine == "vllm" else body
    if engine == "sglang":
        assert body["object"] == "error"
    assert (error["type"], error["param"], error["code"]) == (err_type, param, status)


async def test_bad_json_is_a_400_validation_error(make_client: ClientFactory) -> None:
    client = await make_client()
    response = await client.post(
        "/v1/completions", data=b"{bad", headers={"Content-Type": "application/json"}
    )
    assert response.status == 400
    error = (await response.json())["error"]
    assert (error["type"], error["param"]) == ("Bad Request", "body.1")


async def test_same_seed_same_text_other_seed_other_text(make_client: ClientFactory) -> None:
    texts = []
    for seed in (1, 1, 2):
        client = await make_client(settings(seed=seed))
        body = await (
            await client.post("/v1/completions", json={"prompt": "a", "max_tokens": 20})
        ).json()
        texts.append(body["choices"][0]["text"])
    assert texts[0] == texts[1] != texts[2]


def samples(text: str) -> dict[str, float]:
    values: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            values[sample.name] = values.get(sample.name, 0.0) + sample.value
    return values


@pytest.mark.parametrize(
    ("engine", "ttft", "requests", "generated"),
    [
        (
            "vllm",
            "vllm:time_to_first_token_seconds",
            "vllm:request_success_total",
            "vllm:generation_tokens_total",
        ),
        (
            "sglang",
            "sglang:time_to_first_token_seconds",
            "sglang:num_requests_total",
            "sglang:generation_tokens_total",
        ),
    ],
)
async def test_metrics_count_requests_in_simulated_seconds(
    make_client: ClientFactory, engine: str, ttft: str, requests: str, generated: str
) -> None:
    client = await make_client(settings(engine))
    await asyncio.gather(
        *(
            client.post("/v1/completions", json={"prompt": "a b c d", "max_tokens": 10})
            for _ in range(12)
        )
    )
    values = samples(await (await client.get("/metrics")).text())
    assert values[f"{ttft}_count"] == 12
    assert values[requests] == 12
    assert values[generated] == 120
    # In simulated seconds: every first token costs at least one 4-token prefill step
    # (10.4 ms; wall-clock seconds at time_scale 1000 would be ~1000x smaller), and no
    # request waits longer than a full wave of 8 x 10 tokens ahead of it on 8 seats
    # (10 steps of at most 10 + 0.1 x 8 x 4 ms) plus its own prefill.
    one_prefill = FLAT.step_seconds(4, 0, 0)
    assert values[f"{ttft}_sum"] >= 12 * one_prefill
    wave = 10 * FLAT.step_seconds(8 * 4, 8, 0)
    assert values[f"{ttft}_sum"] <= 12 * (wave + one_prefill * 2)


async def test_client_disconnect_frees_the_request(make_client: ClientFactory) -> None:
    # Real time at scale 1: the 1000 tokens would take >= 10 s, so the request is still
    # running when the client leaves (a manual clock could finish it first).
    real_time = SimSettings(served_model="sim-model", engine="vllm", config=CONFIG)
    client = await make_client(real_time, real_clock=True)
    response = await client.post(
        "/v1/completions", json={"prompt": "a", "max_tokens": 1000, "stream": True}
    )
    await response.content.readline()  # first token arrived: it is running
    response.close()
    # Poll for the condition with a generous deadline (the server notices the disconnect
    # on its next write); the outcome, not the time it took, is what is asserted.
    deadline = asyncio.get_running_loop().time() + 60
    while True:
        text = await (await client.get("/metrics")).text()
        values = samples(text)
        if values["vllm:num_requests_running"] == 0:
            break
        assert asyncio.get_running_loop().time() < deadline, "request never freed"
        await asyncio.sleep(0.01)
    assert values["vllm:kv_cache_usage_perc"] == 0
    # Freed by the abort, not by running to its end.
    by_reason = {
        sample.labels["finished_reason"]: sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if sample.name == "vllm:request_success_total"
    }
    assert by_reason["abort"] == 1 and by_reason["length"] == 0
