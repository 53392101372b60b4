"""The bench client against a tiny in-test streaming server with known behaviour."""

from __future__ import annotations

import asyncio
import json
import math
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from bench_fake_openai import FakeOpenAI, fake_in_thread

from tokenfleet.bench.client import BenchConfig, discover_model, run_benchmark, send_one
from tokenfleet.bench.dataset import DatasetSpec
from tokenfleet.cli import main


@pytest.fixture
async def server() -> AsyncIterator[FakeOpenAI]:
    fake = FakeOpenAI()
    await fake.start()
    yield fake
    await fake.stop()


@pytest.fixture
def server_thread() -> Iterator[str]:
    with fake_in_thread(FakeOpenAI()) as url:
        yield url


def _cfg(url: str, **kw: object) -> BenchConfig:
    args: dict[str, object] = {
        "base_url": url,
        "endpoint": "/v1/completions",
        "model": "m",
        "dataset": DatasetSpec(input_len=16, output_len=5, seed=1),
        "num_prompts": 4,
    }
    args.update(kw)
    return BenchConfig(**args)  # type: ignore[arg-type]


@pytest.mark.parametrize("endpoint", ["/v1/completions", "/v1/chat/completions"])
async def test_streams_are_timed_and_counted(server: FakeOpenAI, endpoint: str) -> None:
    server.ttft_s, server.itl_s = 0.02, 0.005
    outputs, duration = await run_benchmark(_cfg(server.url, endpoint=endpoint))
    assert len(outputs) == 4 and all(o.success for o in outputs), outputs[0].error
    for o in outputs:
        assert o.output_tokens == 5
        assert len(o.itl) == 4  # the chat role-only delta is not a token
        assert o.ttft >= 0.9 * server.ttft_s
        assert o.latency == pytest.approx(o.ttft + sum(o.itl))
        assert o.prompt_len == 42  # the server's usage.prompt_tokens wins over the estimate
        assert o.generated_text == " t0 t1 t2 t3 t4"
    assert duration >= max(o.latency for o in outputs)


@pytest.mark.parametrize(
    ("endpoint", "prompt_key", "extra"),
    [
        ("/v1/completions", "prompt", {}),
        ("/v1/chat/completions", "messages", {"max_completion_tokens": 5}),
    ],
)
async def test_request_body_is_what_vllm_bench_sends(
    server: FakeOpenAI, endpoint: str, prompt_key: str, extra: dict[str, int]
) -> None:
    await run_benchmark(_cfg(server.url, endpoint=endpoint, num_prompts=1))
    body = server.bodies[0]
    assert prompt_key in body
    assert body["model"] == "m"
    assert body["max_tokens"] == 5
    assert body["ignore_eos"] is True
    assert body["stream"] is True
    assert body["stream_options"] == {"include_usage": True}
    assert body["temperature"] == 0.0
    for key, value in extra.items():
        assert body[key] == value


async def test_without_usage_tokens_are_counted_from_chunks(server: FakeOpenAI) -> None:
    server.send_usage = False
    outputs, _ = await run_benchmark(_cfg(server.url, num_prompts=2))
    assert [o.output_tokens for o in outputs] == [5, 5]
    assert [o.prompt_len for o in outputs] == [16, 16]  # the estimate stays


async def test_http_errors_are_failed_requests_with_the_status(server: FakeOpenAI) -> None:
    server.status = 503
    outputs, _ = await run_benchmark(_cfg(server.url, num_prompts=2))
    assert not any(o.success for o in outputs)
    assert "HTTP 503" in outputs[0].error


async def test_server_closing_mid_stream_fails_requests_not_the_run(server: FakeOpenAI) -> None:
    server.close_after = 2
    outputs, _ = await run_benchmark(_cfg(server.url, num_prompts=3, max_concurrency=3))
    assert len(outputs) == 3
    assert not any(o.success for o in outputs)
    for o in outputs:
        assert server.url in o.error
        assert "payload is not completed" in o.error  # aiohttp's words for a cut stream


async def test_connection_torn_down_under_a_stream_is_a_failed_request(
    server: FakeOpenAI,
) -> None:
    """aiohttp raises RuntimeError("Connection closed.") when the connection is closed
    under a response that is still streaming; that is one failed request, not a crash."""

    async def drop_connection(
        session: aiohttp.ClientSession, ctx: object, params: aiohttp.TraceRequestEndParams
    ) -> None:
        connection = params.response.connection
        assert connection is not None and connection.protocol is not None
        connection.protocol.close()  # the headers are in, the body is not

    trace = aiohttp.TraceConfig()
    trace.on_request_end.append(drop_connection)
    url = server.url + "/v1/completions"
    body = json.dumps({"prompt": "x", "max_tokens": 5, "stream": True}).encode()
    async with aiohttp.ClientSession(trace_configs=[trace]) as client:
        out = await send_one(client, url, body, 3, False, {"Content-Type": "application/json"})
    assert not out.success
    assert out.error == f"RuntimeError talking to {url}: Connection closed."


async def test_unreachable_server_fails_requests_not_the_run() -> None:
    outputs, _ = await run_benchmark(_cfg("http://127.0.0.1:9", num_prompts=1))
    assert not outputs[0].success
    assert "127.0.0.1:9" in outputs[0].error


async def test_max_concurrency_is_respected(server: FakeOpenAI) -> None:
    server.gate_at = 3  # no first token before 3 are in flight: every slot fills, whatever
    outputs, _ = await run_benchmark(_cfg(server.url, num_prompts=12, max_concurrency=3))
    assert all(o.success for o in outputs)
    assert server.peak_in_flight == 3


async def test_duration_stops_issuing(server: FakeOpenAI) -> None:
    # Arrivals every 0.1 s (regular); a 0.35 s duration issues the ones at 0.1, 0.2, 0.3.
    cfg = _cfg(server.url, num_prompts=None, request_rate=10.0, burstiness=math.inf, duration=0.35)
    outputs, _ = await run_benchmark(cfg)
    assert len(outputs) == 3
    assert all(o.success for o in outputs)


async def test_duration_follows_the_schedule_on_a_busy_machine(
    server: FakeOpenAI, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every wake-up 60 ms late (a loaded machine): the arrival due at 0.3 s, inside the
    0.35 s duration, is still sent; the wall clock does not decide an open loop."""
    sleep = asyncio.sleep

    async def late(delay: float, *args: Any) -> Any:
        return await sleep(delay + 0.06 if delay > 0 else delay, *args)

    monkeypatch.setattr("tokenfleet.bench.client.asyncio.sleep", late)
    cfg = _cfg(server.url, num_prompts=None, request_rate=10.0, burstiness=math.inf, duration=0.35)
    outputs, _ = await run_benchmark(cfg)
    assert len(outputs) == 3


async def test_closed_loop_with_duration_keeps_concurrency(server: FakeOpenAI) -> None:
    server.ttft_s, server.gate_at = 0.05, 2
    cfg = _cfg(server.url, num_prompts=None, max_concurrency=2, duration=0.2)
    outputs, _ = await run_benchmark(cfg)
    assert len(outputs) >= 2
    assert server.peak_in_flight == 2


async def test_discover_model(server: FakeOpenAI) -> None:
    assert await discover_model(server.url) == "fake/model-1"


def test_cli_end_to_end_writes_vllm_json(server_thread: str, tmp_path: Path) -> None:
    result = tmp_path / "out.json"
    code = main(
        [
            "bench",
            "--base-url",
            server_thread,
            "--num-prompts",
            "6",
            "--random-input-len",
            "8",
            "--random-output-len",
            "3",
            "--goodput",
            "ttft:10000",
            "--metric-percentiles",
            "50,99",
            "--save-result",
            "--result-filename",
            str(result),
        ]
    )
    assert code == 0
    doc = json.loads(result.read_text())
    assert doc["completed"] == 6 and doc["failed"] == 0
    assert doc["model_id"] == "fake/model-1"
    assert doc["total_output_tokens"] == 18
    assert doc["request_goodput"] > 0
    assert {"p50_ttft_ms", "p99_itl_ms", "mean_e2el_ms"} <= set(doc)


@pytest.mark.parametrize(
    ("argv", "fragment"),
    [
        (["--goodput", "ttft"], "--goodput 'ttft'"),
        (["--metric-percentiles", "500"], "--metric-percentiles"),
        (["--num-prompts", "0"], "--num-prompts 0"),
        (["--duration", "5"], "--max-concurrency"),
        (["--random-range-ratio", "2"], "--random-range-ratio"),
    ],
)
def test_cli_user_errors_are_one_line(
    argv: list[str], fragment: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["bench", "--base-url", "http://127.0.0.1:9", "--model", "m", *argv])
    err = capsys.readouterr().err
    assert code == 2
    assert fragment in err
    assert "Traceback" not in err
