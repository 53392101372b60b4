"""The I/O half of `tokenfleet bench`: stream OpenAI requests and time every chunk.

Kept cheap on purpose, because the same client must drive thousands of requests per
second against the simulator: request bodies are serialised before the clock starts, one
aiohttp ClientSession holds keep-alive connections, chunks are parsed with a tiny SSE
parser, and the dispatcher takes a concurrency slot before it creates a task, so a closed
loop (`--request-rate inf --max-concurrency N --duration S`) never queues unbounded work.

The streaming path uses aiohttp rather than httpx (used for the one-off model lookup):
measured in the bench test bench_client_overhead.py, httpx/httpcore spent about 3 ms of CPU per
request (a connection-pool scan linear in the pool size per request, and a failed
`import sniffio` per request), capping one client near 300 requests/s on this machine.
"""

from __future__ import annotations

import asyncio
import json
import math
import os
import random
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import aiohttp
import httpx

from tokenfleet.bench.aggregate import RequestOutput
from tokenfleet.bench.arrival import arrival_offsets, iter_arrivals
from tokenfleet.bench.dataset import DatasetSpec, SampleRequest
from tokenfleet.bench.sse import SSEParser

CHAT_ENDPOINT = "/v1/chat/completions"
COMPLETIONS_ENDPOINT = "/v1/completions"


@dataclass(frozen=True, slots=True)
class BenchConfig:
    base_url: str
    endpoint: str
    model: str
    dataset: DatasetSpec
    num_prompts: int | None  # None: unbounded, only with duration
    request_rate: float = math.inf
    burstiness: float = 1.0
    max_concurrency: int | None = None
    duration: float | None = None
    ignore_eos: bool = True
    temperature: float = 0.0
    extra_body: dict[str, Any] = field(default_factory=dict)
    headers: dict[str, str] = field(default_factory=dict)
    progress: bool = False
    timeout_s: float = 6 * 3600.0

    @property
    def chat(self) -> bool:
        return self.endpoint.rstrip("/").endswith("chat/completions")

    @property
    def api_url(self) -> str:
        return self.base_url.rstrip("/") + "/" + self.endpoint.lstrip("/")


def request_body(cfg: BenchConfig, sample: SampleRequest) -> bytes:
    """The JSON body, like vLLM's benchmark: greedy, streamed, usage in the last chunk."""
    body: dict[str, Any] = {
        "model": cfg.model,
        "temperature": cfg.temperature,
        "max_tokens": sample.expected_output_len,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    if cfg.chat:
        body["messages"] = [{"role": "user", "content": sample.prompt}]
        # Newer OpenAI name; vLLM and SGLang accept both and agree on the value.
        body["max_completion_tokens"] = sample.expected_output_len
    else:
        body["prompt"] = sample.prompt
    if cfg.ignore_eos:
        body["ignore_eos"] = True  # vLLM / SGLang extension: generate exactly max_tokens
    body.update(cfg.extra_body)
    return json.dumps(body, separators=(",", ":")).encode()


def _chunk_text(choice: dict[str, Any], chat: bool) -> tuple[bool, str]:
    """(is a token chunk, its text). A chat stream opens with a role-only delta that
    carries no token; it is not counted as the first token."""
    if not chat:
        return True, choice.get("text") or ""
    delta = choice.get("delta") or {}
    content = delta.get("content") or delta.get("reasoning_content") or ""
    if not content and "role" in delta:
        return False, ""
    return True, content


async def send_one(
    client: aiohttp.ClientSession,
    url: str,
    body: bytes,
    prompt_len: int,
    chat: bool,
    headers: dict[str, str],
) -> RequestOutput:
    """Send one streamed request and time it; never raises (errors land in the output)."""
    out = RequestOutput(prompt_len=prompt_len)
    parser = SSEParser()
    texts: list[str] = []
    chunks = 0
    usage_tokens: int | None = None
    loads = json.loads
    perf = time.perf_counter
    start = last = perf()
    out.start_time = start
    try:
        async with client.post(url, data=body, headers=headers) as resp:
            if resp.status != 200:
                detail = (await resp.read()).decode(errors="replace")[:300]
                out.error = f"HTTP {resp.status} from {url}: {detail}"
                return out
            async for data in resp.content.iter_any():
                now = perf()
                for payload in parser.feed(data):
                    if payload == b"[DONE]":
                        continue
                    event = loads(payload)
                    if "error" in event and not event.get("choices"):
                        out.error = f"stream error from {url}: {event['error']}"
                        return out
                    choices = event.get("choices")
                    if choices:
                        is_token, text = _chunk_text(choices[0], chat)
                        if is_token:
                            if chunks == 0:
                                out.ttft = now - start
                            else:
                                out.itl.append(now - last)
                            chunks += 1
                            last = now
                            if text:
                                texts.append(text)
                    usage = event.get("usage")
                    if usage:
                        if usage.get("completion_tokens") is not None:
                            usage_tokens = int(usage["completion_tokens"])
                        if usage.get("prompt_tokens"):
                            # The server's own count beats our word-count estimate.
                            out.prompt_len = int(usage["prompt_tokens"])
    except (aiohttp.ClientError, TimeoutError, OSError, ValueError, RuntimeError) as error:
        # RuntimeError: aiohttp's "Connection closed." when the connection is torn down
        # under a response still streaming (a replica stopped mid-stream); like any
        # disconnect, the request failed and the run goes on.
        out.error = f"{type(error).__name__} talking to {url}: {error}"
        return out
    if chunks == 0:
        out.error = f"{url} streamed no token chunk; is `stream: true` supported?"
        return out
    out.success = True
    out.latency = last - start
    # Fallback when the server sends no usage: one chunk per token, as vLLM streams.
    out.output_tokens = usage_tokens if usage_tokens is not None else chunks
    out.generated_text = "".join(texts)
    return out


class Progress:
    """A one-line stderr progress display, redrawn at most 10 times a second."""

    def __init__(self, total: int | None, enabled: bool) -> None:
        self.total = total
        self.enabled = enabled
        self.done = 0
        self._start = time.perf_counter()
        self._drawn = 0.0

    def update(self) -> None:
        self.done += 1
        if not self.enabled:
            return
        now = time.perf_counter()
        if now - self._drawn >= 0.1 or self.done == self.total:
            self._drawn = now
            of = f"/{self.total}" if self.total else ""
            elapsed = now - self._start
            rate = self.done / elapsed if elapsed > 0 else 0.0
            sys.stderr.write(f"\r{self.done}{of} requests  {elapsed:6.1f}s  {rate:8.1f} req/s")
            sys.stderr.flush()

    def close(self) -> None:
        if self.enabled:
            sys.stderr.write("\n")
            sys.stderr.flush()


def _offsets(cfg: BenchConfig) -> Iterator[float]:
    rng = random.Random(cfg.dataset.seed)
    if cfg.num_prompts is None:
        return iter_arrivals(cfg.request_rate, cfg.burstiness, rng)
    return iter(arrival_offsets(cfg.num_prompts, cfg.request_rate, cfg.burstiness, rng))


def make_client(max_concurrency: int | None, timeout_s: float) -> aiohttp.ClientSession:
    """One pooled session. trust_env stays False: a proxy from the environment must never
    sit between the benchmark and a local server (it would be measured too)."""
    connector = aiohttp.TCPConnector(limit=max_concurrency or 0, ttl_dns_cache=300)
    return aiohttp.ClientSession(
        connector=connector,
        timeout=aiohttp.ClientTimeout(total=timeout_s, sock_connect=30.0),
        trust_env=False,
        # The body is sent as prepared bytes and never decoded by aiohttp's JSON helpers.
        skip_auto_headers=("User-Agent",),
    )


async def run_benchmark(cfg: BenchConfig) -> tuple[list[RequestOutput], float]:
    """Issue the requests on the arrival schedule; return their outputs (in issue order)
    and the wall-clock duration from the first send to the last completion."""
    headers = {"Content-Type": "application/json", **cfg.headers}
    api_key = os.environ.get("OPENAI_API_KEY")
    if api_key and "Authorization" not in headers:
        headers["Authorization"] = f"Bearer {api_key}"
    url = cfg.api_url
    # Prepare prompts and bodies before the clock starts, when their number is known.
    prepared: list[tuple[bytes, int]] | None = None
    if cfg.num_prompts is not None:
        prepared = []
        for i in range(cfg.num_prompts):
            sample = cfg.dataset.request(i)
            prepared.append((request_body(cfg, sample), sample.prompt_len))
    offsets = _offsets(cfg)
    slots = asyncio.Semaphore(cfg.max_concurrency) if cfg.max_concurrency else None
    progress = Progress(cfg.num_prompts, cfg.progress)
    tasks: list[asyncio.Task[RequestOutput]] = []

    async def one(client: aiohttp.ClientSession, body: bytes, prompt_len: int) -> RequestOutput:
        try:
            return await send_one(client, url, body, prompt_len, cfg.chat, headers)
        finally:
            if slots is not None:
                slots.release()
            progress.update()

    async with make_client(cfg.max_concurrency, cfg.timeout_s) as client:
        start = time.perf_counter()
        index = 0
        while cfg.num_prompts is None or index < cfg.num_prompts:
            offset = next(offsets)
            if cfg.duration is not None and offset >= cfg.duration:
                break
            delay = start + offset - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
            if slots is not None:
                await slots.acquire()
                # A closed loop may wait past the duration for a slot: stop then. An open
                # loop's schedule (the offset check above) decides alone, so a late wake-up
                # on a busy machine never drops an arrival that was due inside the duration.
                if cfg.duration is not None and time.perf_counter() - start >= cfg.duration:
                    slots.release()
                    break
            if prepared is not None:
                body, prompt_len = prepared[index]
            else:
                sample = cfg.dataset.request(index)
                body, prompt_len = request_body(cfg, sample), sample.prompt_len
            tasks.append(asyncio.create_task(one(client, body, prompt_len)))
            index += 1
            if slots is None and offset == 0.0 and index % 256 == 0:
                await asyncio.sleep(0)  # let a burst start sending while it is queued
        outputs = list(await asyncio.gather(*tasks))
        duration = time.perf_counter() - start
    progress.close()
    return outputs, duration


async def discover_model(base_url: str, timeout_s: float = 30.0) -> str:
    """The first model id from GET /v1/models (what `vllm serve` registered)."""
    url = base_url.rstrip("/") + "/v1/models"
    async with httpx.AsyncClient(timeout=timeout_s, trust_env=False) as client:
        resp = await client.get(url)
        resp.raise_for_status()
        models = resp.json().get("data") or []
    if not models:
        raise ValueError(f"--model: {url} lists no models; pass --model NAME")
    return str(models[0]["id"])
