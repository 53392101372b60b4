"""A tiny in-test OpenAI streaming server (aiohttp) for the bench client's tests.

It streams exactly max_tokens chunks with fixed, known delays, records every request body,
and tracks how many requests were in flight, so tests can check what the client measured
against what the server did.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web


@dataclass
class FakeOpenAI:
    ttft_s: float = 0.0
    itl_s: float = 0.0
    send_usage: bool = True
    status: int = 200
    prompt_tokens: int | None = 42  # what usage reports; None: omit
    bodies: list[dict[str, Any]] = field(default_factory=list)
    in_flight: int = 0
    peak_in_flight: int = 0
    # Hold every first token until this many requests are in flight at once (then never
    # again): concurrency tests see the client's limit reached whatever the machine's speed.
    gate_at: int | None = None
    _gate: asyncio.Event | None = None
    # Drop the connection after this many token chunks, with no end of stream, as a
    # server stopped mid-stream does; None: stream to the end.
    close_after: int | None = None
    url: str = ""
    _runner: web.AppRunner | None = None

    async def start(self) -> str:
        app = web.Application()
        app.router.add_post("/v1/completions", self._generate)
        app.router.add_post("/v1/chat/completions", self._generate)
        app.router.add_get("/v1/models", self._models)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        port = self._runner.addresses[0][1]
        self.url = f"http://127.0.0.1:{port}"
        return self.url

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()

    async def _models(self, request: web.Request) -> web.Response:
        return web.json_response({"object": "list", "data": [{"id": "fake/model-1"}]})

    async def _generate(self, request: web.Request) -> web.StreamResponse:
        body = await request.json()
        self.bodies.append(body)
        if self.status != 200:
            return web.json_response({"error": {"message": "nope"}}, status=self.status)
        chat = "messages" in body
        n = int(body.get("max_completion_tokens") or body["max_tokens"])
        self.in_flight += 1
        self.peak_in_flight = max(self.peak_in_flight, self.in_flight)
        try:
            resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
            await resp.prepare(request)
            if self.gate_at is not None:
                self._gate = self._gate or asyncio.Event()
                if self.in_flight >= self.gate_at:
                    self._gate.set()
                await self._gate.wait()
            await asyncio.sleep(self.ttft_s)
            if chat:  # vLLM opens a chat stream with a role-only delta
                await self._send(resp, {"choices": [{"delta": {"role": "assistant"}}]})
            for i in range(n):
                if i == self.close_after:
                    assert request.transport is not None
                    request.transport.close()
                    return resp
                if i:
                    await asyncio.sleep(self.itl_s)
                if chat:
                    choice: dict[str, Any] = {"index": 0, "delta": {"content": f" t{i}"}}
                else:
                    choice = {"index": 0, "text": f" t{i}"}
                await self._send(resp, {"choices": [choice]})
            if self.send_usage:
                usage: dict[str, Any] = {"completion_tokens": n}
                if self.prompt_tokens is not None:
                    usage["prompt_tokens"] = self.prompt_tokens
                await self._send(resp, {"choices": [], "usage": usage})
            await resp.write(b"data: [DONE]\n\n")
            await resp.write_eof()
            return resp
        finally:
            self.in_flight -= 1

    @staticmethod
    async def _send(resp: web.StreamResponse, event: dict[str, Any]) -> None:
        await resp.write(b"data: " + json.dumps(event).encode() + b"\n\n")


@contextlib.contextmanager
def fake_in_thread(fake: FakeOpenAI) -> Iterator[str]:
    """Serve `fake` from its own event loop in a thread, for code that calls asyncio.run()
    itself (the CLI). Yields the base URL."""
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    url = asyncio.run_coroutine_threadsafe(fake.start(), loop).result(timeout=10)
    try:
        yield url
    finally:
        asyncio.run_coroutine_threadsafe(fake.stop(), loop).result(timeout=10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=10)
        loop.close()
