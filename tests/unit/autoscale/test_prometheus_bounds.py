"""The Prometheus client is bounded by its caller's needs, not by the server's goodwill:
an answer past the size cap is refused while it streams, a trickling answer is cut at the
query's total deadline, and an answer of the wrong shape is a MalformedAnswer (one clear
error the autoscaler holds on), never a ValueError or KeyError."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx
import pytest

from tokenfleet.autoscale.prometheus import (
    AnswerTooLarge,
    MalformedAnswer,
    PrometheusClient,
    PrometheusUnreachable,
)


class Stream(httpx.AsyncByteStream):
    def __init__(self, chunks: Callable[[], AsyncIterator[bytes]]) -> None:
        self.chunks = chunks
        self.sent = 0

    async def __aiter__(self) -> AsyncIterator[bytes]:
        async for chunk in self.chunks():
            self.sent += len(chunk)
            yield chunk


def client(handler: Callable[[httpx.Request], httpx.Response], **kwargs: Any) -> PrometheusClient:
    return PrometheusClient(
        "http://prom.test:9090", transport=httpx.MockTransport(handler), retries=0, **kwargs
    )


def answer(value: Any) -> dict[str, Any]:
    result = [{"metric": {}, "value": [1.0, value]}]
    return {"status": "success", "data": {"resultType": "vector", "result": result}}


async def test_an_answer_past_the_cap_is_refused_while_it_streams() -> None:
    async def endless() -> AsyncIterator[bytes]:
        yield b'{"status":"success","data":{"resultType":"vector","result":['
        while True:
            yield b'{"metric":{"pod":"' + b"p" * 1000 + b'"},"value":[1,"1"]},'

    stream = Stream(endless)
    prom = client(lambda _: httpx.Response(200, stream=stream), max_bytes=100_000)
    with pytest.raises(AnswerTooLarge, match="100000-byte cap"):
        await prom.query("up")
    assert stream.sent < 200_000  # stopped reading at the cap, not at the end
    await prom.close()


async def test_a_declared_length_past_the_cap_is_refused_before_reading() -> None:
    body = json.dumps(answer("1")).encode() + b" " * 5000
    prom = client(lambda _: httpx.Response(200, content=body), max_bytes=1000)
    with pytest.raises(AnswerTooLarge, match="declared"):
        await prom.query("up")
    await prom.close()


async def test_a_trickling_answer_is_cut_at_the_total_deadline() -> None:
    async def trickle() -> AsyncIterator[bytes]:
        yield b'{"status":"success",'
        while True:
            await asyncio.sleep(0.05)  # each read is quick: a per-read timeout never fires
            yield b" "

    prom = client(lambda _: httpx.Response(200, stream=Stream(trickle)), deadline=0.3)
    with pytest.raises(PrometheusUnreachable, match=r"within the 0\.3 s deadline"):
        await prom.query("up")
    await prom.close()


@pytest.mark.parametrize(
    ("body", "text"),
    [
        (answer("not-a-number"), "is not a number"),
        (answer(None), "is not a number"),
        (answer({"x": 1}), "is not a number"),
        ({"status": "success", "data": {"resultType": "vector", "result": [{}]}}, "malformed"),
        ({"status": "success", "data": {"resultType": "vector", "result": 5}}, "malformed"),
        ({"status": "success", "data": {"resultType": "matrix", "result": []}}, "result type"),
        ({"status": "success", "data": "x"}, "without a data object"),
        ([1, 2], "unexpected answer"),
    ],
)
async def test_a_malformed_answer_is_one_clear_error(body: Any, text: str) -> None:
    prom = client(lambda _: httpx.Response(200, json=body))
    with pytest.raises(MalformedAnswer, match=text):
        await prom.query("up")
    await prom.close()


async def test_a_non_json_answer_is_malformed() -> None:
    prom = client(lambda _: httpx.Response(200, content=b"<html>login</html>"))
    with pytest.raises(MalformedAnswer, match="non-JSON"):
        await prom.query("up")
    await prom.close()


async def test_a_good_answer_still_parses() -> None:
    prom = client(lambda _: httpx.Response(200, json=answer("2.5")))
    assert (await prom.query("up")).samples[0].value == 2.5
    await prom.close()
