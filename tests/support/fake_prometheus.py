"""A stand-in Prometheus HTTP API on a loopback port, for what a real one will not do on
demand: count the queries it is sent, answer huge, trickle, or answer garbage.

`mode` is read on every request, so a test switches it while the operator runs:
- "ok": one sample of value `value` for every query (a valid instant vector);
- "huge": a valid JSON answer of `huge_bytes` bytes, streamed in 64 KiB chunks;
- "trickle": a 200 whose body comes one byte every `trickle_seconds`, never ending;
- "garbage": a success answer whose sample value is not a number.
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import aiohttp.web

CHUNK = 64 * 1024


class FakePrometheus:
    def __init__(self, mode: str = "ok", value: str = "1") -> None:
        self.mode = mode
        self.value = value
        self.huge_bytes = 40 * 1000**2
        self.trickle_seconds = 2.0
        self.queries = 0
        self.open_connections = 0
        self._runner: aiohttp.web.AppRunner | None = None
        self.url = ""

    async def __aenter__(self) -> FakePrometheus:
        app = aiohttp.web.Application()
        app.router.add_route("*", "/api/v1/{path:.*}", self._serve)
        self._runner = aiohttp.web.AppRunner(app, handler_cancellation=True)
        await self._runner.setup()
        site = aiohttp.web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        self.url = f"http://127.0.0.1:{port}"
        return self

    async def __aexit__(self, *_: Any) -> None:
        assert self._runner is not None
        await self._runner.cleanup()

    async def _serve(self, request: aiohttp.web.Request) -> aiohttp.web.StreamResponse:
        self.queries += 1
        await request.read()
        now = time.time()
        if self.mode == "trickle":
            return await self._trickle(request)
        if self.mode == "huge":
            return await self._huge(request, now)
        value: Any = "not-a-number" if self.mode == "garbage" else self.value
        body = {
            "status": "success",
            "data": {"resultType": "vector", "result": [{"metric": {}, "value": [now, value]}]},
        }
        return aiohttp.web.json_response(body)

    async def _trickle(self, request: aiohttp.web.Request) -> aiohttp.web.StreamResponse:
        response = aiohttp.web.StreamResponse(headers={"Content-Type": "application/json"})
        await response.prepare(request)
        self.open_connections += 1
        try:
            await response.write(b'{"status":"success","data":{"resultType":"vector","result":[')
            while True:
                await asyncio.sleep(self.trickle_seconds)
                await response.write(b" ")
        finally:
            self.open_connections -= 1

    async def _huge(self, request: aiohttp.web.Request, now: float) -> aiohttp.web.StreamResponse:
        response = aiohttp.web.StreamResponse(headers={"Content-Type": "application/json"})
        response.content_length = None
        await response.prepare(request)
        head = b'{"status":"success","data":{"resultType":"vector","result":['
        sample = json.dumps({"metric": {"pod": "p" * 200}, "value": [now, "1"]}).encode()
        await response.write(head)
        sent, first = len(head), True
        while sent < self.huge_bytes:
            chunk = b",".join([sample] * (CHUNK // (len(sample) + 1)))
            chunk = chunk if first else b"," + chunk
            first = False
            try:
                await response.write(chunk)
            except ConnectionError:  # the client stopped reading: as it should
                return response
            sent += len(chunk)
        await response.write(b"]}}")
        return response
