"""One record per engine kind: where every fact tokenfleet knows about that engine lives.

Pure lookups, no I/O. The facts themselves stay in the engine's own module (engines/vllm.py,
engines/sglang.py: program, ports, flags, metric names, histogram bounds) and, for the
memory model's version profiles, in capacity/engine_profiles.py: the capacity model reads
those at every plan, and engines/ already sits above capacity (it imports capacity.types), so
the registry points at them rather than moving them. Container images per engine and vendor
are engines/images.py's table.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from tokenfleet.capacity.engine_profiles import DEFAULT_VERSIONS, EngineProfile, engine_profile
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
        mixed_prefill=True,
        token_buckets=vllm.request_token_buckets,
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
        mixed_prefill=False,
        token_buckets=sglang.request_token_buckets,
    ),
}


def engine(kind: str) -> Engine:
    """The registry's record of `kind`; a UserError naming the field for an unknown one."""
    try:
        return REGISTRY[kind]
    except KeyError:
        raise UserError("engine", kind, "unknown engine", "use vllm or sglang") from None
