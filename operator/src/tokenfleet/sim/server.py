"""The simulator's HTTP side (aiohttp): OpenAI endpoints, /health, /metrics and /sim/clock.

All engine behaviour lives in scheduler.py (pure) and engine.py (timing); this file only
parses, waits on a request's Handle and writes JSON or SSE.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST

from tokenfleet.engines import engine as engine_record
from tokenfleet.scheduling.core import Scheduler, SchedulerConfig, SimRequest, StepTimer
from tokenfleet.sim.engine import Clock, Handle, SimEngine
from tokenfleet.sim.exporter import EngineMetrics, metrics_for
from tokenfleet.sim.lora import Adapters, LoraGauges, LoraMetrics, LoraSettings, LoraTimer
from tokenfleet.sim.protocol import (
    CHAT_DEFAULT_MAX_TOKENS,
    ApiError,
    ParsedRequest,
    ResponseBuilder,
    json_error,
    models_body,
    parse_request,
)
from tokenfleet.sim.roles import DecodeMetrics, KvTransfer
from tokenfleet.sim.tokens import Filler

ENGINE_KEY = web.AppKey("engine", SimEngine)
ADAPTERS_KEY = web.AppKey("adapters", Adapters)


@dataclass(frozen=True)
class SimSettings:
    served_model: str
    engine: str  # "vllm" | "sglang"
    config: SchedulerConfig
    time_scale: float = 1.0
    catch_up_seconds: float = 0.1  # see SimEngine: wall lag caught up before it is given up
    seed: int = 0
    chat_default_max_tokens: int = CHAT_DEFAULT_MAX_TOKENS
    engine_version: str | None = None  # picks version-dependent metric names
    lora: LoraSettings | None = None  # LoRA slots (--enable-lora); None: none
    # (K, acceptance rate) of the speculative decoding the step timer runs; None: none.
    speculative: tuple[int, float] | None = None
    # Disaggregated serving (sim/roles.py): "prefill" runs every request to its first token;
    # "decode" lands requests whose KV was transferred, recorded by `kv_transfer`.
    role: str | None = None
    kv_transfer: KvTransfer | None = None


SETTINGS_KEY = web.AppKey("settings", SimSettings)


def build_app(
    settings: SimSettings, timer: StepTimer, clock: Clock | None = None
) -> web.Application:
    """`clock`: see SimEngine (None: the event loop's clock)."""
    app = web.Application(client_max_size=64 * 1024**2)
    app[SETTINGS_KEY] = settings

    async def lifecycle(app: web.Application) -> AsyncIterator[None]:
        metrics: EngineMetrics = metrics_for(
            settings.engine,
            settings.served_model,
            settings.config.max_model_len,
            settings.engine_version,
            settings.speculative,
        )
        if settings.kv_transfer is not None and engine_record(settings.engine).kv_transfer_metrics:
            metrics = DecodeMetrics(metrics, settings.kv_transfer, settings.served_model)
        step_timer: StepTimer = timer
        lora = settings.lora
        lora_timer = None
        if lora is not None:
            adapters = Adapters(settings.engine, settings.served_model, lora)
            app[ADAPTERS_KEY] = adapters
            labels = {"model_name": settings.served_model, "engine_type": "unified",
                      "tp_rank": "0", "pp_rank": "0", "moe_ep_rank": "0"}  # fmt: skip
            gauges = LoraGauges(settings.engine, metrics.registry, lora.slots, labels)
            metrics = LoraMetrics(metrics, adapters, gauges)
            lora_timer = LoraTimer(timer, adapters, lora.fixed_s, lora.per_adapter_s)
            step_timer = lora_timer
        engine = SimEngine(
            Scheduler(settings.config, step_timer), metrics, settings.time_scale, clock,
            settings.catch_up_seconds,
        )  # fmt: skip
        if lora_timer is not None:
            lora_timer.scheduler = engine.scheduler
        metrics.on_queue_change(engine.scheduler)
        engine.start()
        app[ENGINE_KEY] = engine
        yield
        await engine.stop()

    app.cleanup_ctx.append(lifecycle)
    app.router.add_get("/health", health)
    app.router.add_get("/metrics", metrics_handler)
    app.router.add_get("/sim/clock", clock_handler)
    app.router.add_get("/v1/models", models)
    app.router.add_post("/v1/completions", completions)
    app.router.add_post("/v1/chat/completions", chat_completions)
    lora = settings.lora
    record = engine_record(settings.engine)
    if lora is not None and (lora.runtime_updates or record.lora_endpoints_always):
        prefix = record.lora_endpoint_prefix
        app.router.add_post(f"{prefix}/load_lora_adapter", load_adapter)
        app.router.add_post(f"{prefix}/unload_lora_adapter", unload_adapter)
    return app


async def health(request: web.Request) -> web.Response:
    return web.Response(status=200)


async def metrics_handler(request: web.Request) -> web.Response:
    body = request.app[ENGINE_KEY].metrics.exposition()
    return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})


async def clock_handler(request: web.Request) -> web.Response:
    """The simulator's own clock (no engine has this route): virtual seconds so far and
    those lost to a busy machine (SimEngine.lost_seconds), so a harness can tell whether the
    time scale held."""
    engine = request.app[ENGINE_KEY]
    return web.json_response(
        {
            "virtualSeconds": engine.now(),
            "lostSeconds": engine.lost_seconds,
            "timeScale": engine.time_scale,
        }
    )


async def models(request: web.Request) -> web.Response:
    s = request.app[SETTINGS_KEY]
    body = models_body(s.served_model, s.config.max_model_len, s.engine)
    adapters = request.app.get(ADAPTERS_KEY)
    if adapters is not None:
        body["data"].extend(adapters.cards())
    return web.json_response(body)


async def _json_body(request: web.Request) -> dict[str, Any] | None:
    try:
        body = json.loads(await request.read())
    except (json.JSONDecodeError, UnicodeDecodeError):
        return None
    return body if isinstance(body, dict) else None


def _answer(status: int, body: str | dict[str, Any]) -> web.Response:
    if isinstance(body, str):
        return web.Response(status=status, text=body)
    return web.json_response(body, status=status)


async def load_adapter(request: web.Request) -> web.Response:
    adapters = request.app[ADAPTERS_KEY]
    body = await _json_body(request) or {}
    outcome = adapters.load(
        body.get("lora_name"), body.get("lora_path"), bool(body.get("pinned", False))
    )
    return _answer(outcome.status, outcome.body)


async def unload_adapter(request: web.Request) -> web.Response:
    adapters = request.app[ADAPTERS_KEY]
    body = await _json_body(request) or {}
    outcome = adapters.unload(body.get("lora_name"))
    return _answer(outcome.status, outcome.body)


async def completions(request: web.Request) -> web.StreamResponse:
    return await _generate(request, chat=False)


async def chat_completions(request: web.Request) -> web.StreamResponse:
    return await _generate(request, chat=True)


async def _generate(request: web.Request, chat: bool) -> web.StreamResponse:
    settings = request.app[SETTINGS_KEY]
    engine = request.app[ENGINE_KEY]
    try:
        try:
            body = json.loads(await request.read())
        except (json.JSONDecodeError, UnicodeDecodeError) as error:
            raise json_error(error) from None
        adapters = request.app.get(ADAPTERS_KEY)
        adapter = None
        name = settings.served_model
        if adapters is not None and isinstance(body, dict) and isinstance(body.get("model"), str):
            adapter = adapters.resolve(body["model"])
            if adapter is not None:
                name = body["model"]  # the request names a loaded adapter
        parsed = parse_request(
            body,
            chat,
            name,
            settings.config.max_model_len,
            settings.chat_default_max_tokens,
        )
    except ApiError as error:
        return web.json_response(error.body(settings.engine), status=error.status)

    index = engine.next_index()
    # A prefill server computes the prompt and its first token only.
    max_tokens = 1 if settings.role == "prefill" else parsed.max_tokens
    sim = SimRequest(f"req-{index}", parsed.prompt_tokens, max_tokens, 0.0, parsed.stream)
    if adapters is not None:
        adapters.tag(sim, adapter)
    handle = engine.submit(sim)
    builder = ResponseBuilder(parsed, index, settings.seed)
    filler = Filler(settings.seed, index)
    try:
        if parsed.stream:
            return await _stream(request, handle, builder, filler, parsed)
        while not sim.finished:
            await handle.wait(sim.output_tokens)
        text = "".join(filler.next_word(i == 0) for i in range(sim.output_tokens))
        return web.json_response(builder.full(text, sim.output_tokens, "length"))
    except (asyncio.CancelledError, ConnectionResetError):
        engine.abort(sim)
        raise
    finally:
        engine.release(sim)
        if adapters is not None:
            adapters.forget(sim)


def _sse(payload: dict[str, Any]) -> bytes:
    return b"data: " + json.dumps(payload, separators=(",", ":")).encode() + b"\n\n"


async def _stream(
    request: web.Request,
    handle: Handle,
    builder: ResponseBuilder,
    filler: Filler,
    parsed: ParsedRequest,
) -> web.StreamResponse:
    response = web.StreamResponse(
        headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}
    )
    await response.prepare(request)
    sim = handle.request
    if parsed.chat:
        await response.write(_sse(builder.chunk(None, None, role=True)))
    delivered = 0
    while delivered < sim.output_tokens or not sim.finished:
        available = await handle.wait(delivered)
        # Everything produced since the last write goes out in one write (one syscall).
        parts = []
        for i in range(delivered, available):
            last = sim.finished and i == available - 1
            word = filler.next_word(i == 0)
            parts.append(_sse(builder.chunk(word, "length" if last else None)))
        delivered = available
        if parts:
            await response.write(b"".join(parts))
    tail = b""
    if parsed.include_usage:
        tail += _sse(builder.usage_chunk(sim.output_tokens))
    await response.write(tail + b"data: [DONE]\n\n")
    await response.write_eof()
    return response
