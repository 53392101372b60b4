"""One record per engine kind: where every fact tokenfleet knows about that engine lives.

Pure lookups, no I/O. The facts themselves stay in the engine's own module (engines/vllm.py,
engines/sglang.py: program, ports, flags, metric names, histogram bounds) and, for the
memory model's version profiles, in capacity/engine_profiles.py: the capacity model reads
those at every plan, and engines/ already sits above capacity (it imports capacity.types), so
the registry points at them rather than moving them; so do the capacity model's engine
facts (EngineFacts, the record's `facts`). Callers outside engines/ read a fact of the record
and never compare an engine's name (a unit test walks the package's syntax to hold it). Container
images per engine and vendor are engines/images.py's table.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tokenfleet.capacity.engine_profiles import (
    DEFAULT_VERSIONS,
    ENGINE_FACTS,
    EngineFacts,
    EngineProfile,
    engine_profile,
)
from tokenfleet.capacity.types import Plan
from tokenfleet.engines import sglang, vllm
from tokenfleet.engines.types import EngineInfo, Launch, MetricNames
from tokenfleet.errors import UserError


@dataclass(frozen=True)
class Engine:
    """An engine kind's facts, by meaning."""

    info: EngineInfo  # port, probe and metrics paths, metric names
    program: tuple[str, ...]  # the container command before the engine's arguments
    default_version: str  # the version plans assume when spec.engine.version is unset
    # Histogram base name -> the bucket upper bounds the engine exports it with (the
    # token-length histograms of vLLM depend on max-model-len and are not listed).
    buckets: Mapping[str, tuple[float, ...]]
    # The engine's flags after its program, and its whole container command (a program
    # replaces `program` for images that start the engine another way).
    args: Callable[[Plan, Launch], list[str]]
    command: Callable[[Plan, Launch, Sequence[str]], list[str]]
    # The scheduler's view of the engine, for the simulator and the fleet replay: the KV
    # page in tokens, whether prefill chunks share a step with decodes (SGLang runs prefill
    # batches its decodes wait for), and the token-length histograms' bounds at a context.
    block_size: int
    mixed_prefill: bool
    token_buckets: Callable[[int], Sequence[float]]
    # What the capacity model and its callers decide by engine (memory flag, how the KV
    # pool is sized, LoRA layout, P/D backends): capacity/engine_profiles.py, below us.
    facts: EngineFacts
    # Rendering: the env var that points the engine's compile cache at the cache volume
    # (None: it has none); whether P/D's KV handshake runs over a side channel on every
    # role's pod (vLLM's NixlConnector) rather than the prefill's bootstrap port (SGLang).
    cache_root_env: str | None
    kv_side_channel: bool
    # The llm-d endpoint picker's metrics extractor: whether this is its default engine,
    # and whether it reads the engine's loaded adapters (for LoRA affinity scoring).
    picker_default: bool
    picker_reads_adapters: bool
    # Whether the model is the first positional argument after the program (`vllm serve
    # MODEL`) rather than a flag.
    model_positional: bool
    # The OpenAI-compatible server, as the simulator answers for it: an error's JSON body
    # from its fields (message, type, param, code); the path prefix of the adapter load /
    # unload endpoints, and whether they exist without being switched on (vLLM wants
    # VLLM_ALLOW_RUNTIME_LORA_UPDATING); what joins the base model's name and an adapter's
    # in a request's `model` (None: the adapter's name alone); whether its LoRA pool is
    # exported as occupancy gauges (SGLang) rather than vLLM's lora_requests_info; whether
    # a decode replica exports the KV connector's transfer series (vLLM's NIXL).
    error_body: Callable[[dict[str, Any]], dict[str, Any]]
    lora_endpoint_prefix: str
    lora_endpoints_always: bool
    adapter_separator: str | None
    lora_pool_gauges: bool
    kv_transfer_metrics: bool

    @property
    def name(self) -> str:
        return self.info.name

    @property
    def metrics(self) -> MetricNames:
        return self.info.metrics

    def profile(self, version: str | None = None) -> EngineProfile:
        """The memory model's profile of this engine at `version` (default: default_version)."""
        return engine_profile(self.name, version)


def _latency_buckets(
    m: MetricNames, e2e: tuple[float, ...], queue: tuple[float, ...]
) -> dict[str, tuple[float, ...]]:
    """The latency histograms every engine exports: TTFT and ITL (and per-request TPOT) with
    the bounds its MetricNames carries, end-to-end and queue time with the engine's own."""
    buckets = {m.ttft: m.ttft_buckets, **{name: m.itl_buckets for name in m.itl}}
    buckets[m.e2e] = e2e
    buckets[m.queue_time] = queue
    if m.request_tpot:
        buckets[m.request_tpot] = m.itl_buckets
    return buckets


REGISTRY: Mapping[str, Engine] = {
    "vllm": Engine(
        info=vllm.INFO,
        program=vllm.PROGRAM,
        default_version=DEFAULT_VERSIONS["vllm"],
        buckets=_latency_buckets(
            vllm.METRICS, vllm.REQUEST_LATENCY_BUCKETS, vllm.REQUEST_LATENCY_BUCKETS
        ),
        args=vllm.engine_args,
        command=vllm.engine_command,
        block_size=vllm.BLOCK_SIZE,
        mixed_prefill=ENGINE_FACTS["vllm"].mixed_prefill,
        token_buckets=vllm.request_token_buckets,
        facts=ENGINE_FACTS["vllm"],
        cache_root_env="VLLM_CACHE_ROOT",
        kv_side_channel=True,
        picker_default=True,
        picker_reads_adapters=True,
        model_positional=True,
        error_body=vllm.error_body,
        lora_endpoint_prefix="/v1",
        lora_endpoints_always=False,
        adapter_separator=None,
        lora_pool_gauges=False,
        kv_transfer_metrics=True,
    ),
    "sglang": Engine(
        info=sglang.INFO,
        program=sglang.PROGRAM,
        default_version=DEFAULT_VERSIONS["sglang"],
        buckets={
            **_latency_buckets(sglang.METRICS, sglang.E2E_BUCKETS, sglang.QUEUE_BUCKETS),
            sglang.METRICS.prompt_length: sglang.TOKENS_BUCKETS,
            sglang.METRICS.output_length: sglang.TOKENS_BUCKETS,
        },
        args=sglang.engine_args,
        command=sglang.engine_command,
        block_size=sglang.BLOCK_SIZE,
        mixed_prefill=ENGINE_FACTS["sglang"].mixed_prefill,
        token_buckets=sglang.request_token_buckets,
        facts=ENGINE_FACTS["sglang"],
        cache_root_env=None,
        kv_side_channel=False,
        picker_default=False,
        picker_reads_adapters=False,
        model_positional=False,
        error_body=sglang.error_body,
        lora_endpoint_prefix="",
        lora_endpoints_always=True,
        adapter_separator=":",
        lora_pool_gauges=True,
        kv_transfer_metrics=False,
    ),
}


def engine(kind: str) -> Engine:
    """The registry's record of `kind`; a UserError naming the field for an unknown one."""
    try:
        return REGISTRY[kind]
    except KeyError:
        raise UserError("engine", kind, "unknown engine", "use vllm or sglang") from None
