"""What the rest of tokenfleet needs to know about an inference engine, as plain records."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal


@dataclass(frozen=True)
class MetricNames:
    """Prometheus series an engine exports, by meaning.

    Histogram names are base names (add `_bucket`, `_sum`, `_count`). Where an engine renamed
    a series, the tuple lists every name, newest first, so queries can match old and new
    engine versions at once (vLLM hides a deprecated name one minor release after
    deprecating it and removes it the release after).
    """

    ttft: str
    itl: tuple[str, ...]
    e2e: str
    queue_time: str
    running: str
    waiting: str
    kv_usage: tuple[str, ...]
    request_success: str
    prompt_tokens: str
    generation_tokens: str
    request_tpot: str | None  # per-request time per output token, where the engine has it
    ttft_buckets: tuple[float, ...]
    itl_buckets: tuple[float, ...]
    model_label: str = "model_name"
    prompt_length: str = ""  # per-request prompt-length histogram (the request mix)
    output_length: str = ""  # per-request generated-length histogram
    # Prefix cache, as counters of prompt tokens (hits / queries over a window), or where
    # the engine has only a gauge of the hit rate, that gauge.
    prefix_cache_hits: str = ""
    prefix_cache_queries: str = ""
    prefix_cache_hit_rate: str = ""
    # Speculative decoding's acceptance: counters of accepted draft tokens and of drafts
    # (tokens per verify step = 1 + accepted / drafts over a window), or where the engine
    # has only a gauge of that mean acceptance length, that gauge.
    spec_accepted_tokens: str = ""
    spec_drafts: str = ""
    spec_accept_length: str = ""


@dataclass(frozen=True)
class EngineInfo:
    """Ports, paths and metric names of one engine."""

    name: str
    port: int  # the OpenAI-compatible HTTP port the engine listens on
    health_path: str
    metrics_path: str
    metrics: MetricNames
    metrics_need_flag: bool  # SGLang exports nothing unless started with --enable-metrics
    # First version whose non-leader nodes (of a multi-node replica) answer /health on the
    # engine port; None: they serve no HTTP at all.
    workers_health_since: tuple[int, int, int] | None
    dist_port: int  # rendezvous port on the leader of a multi-node replica


@dataclass(frozen=True)
class NodeRole:
    """Where one process sits in a replica that spans several nodes.

    `node_rank` and `leader_address` may be Kubernetes `$(VAR)` references, e.g.
    "$(LWS_WORKER_INDEX)" and "$(LWS_LEADER_ADDRESS)": the kubelet expands them in a
    container's command and args from the env vars LeaderWorkerSet injects, so the same
    template serves every worker.
    """

    nnodes: int
    node_rank: int | str
    leader_address: str

    @property
    def is_leader(self) -> bool:
        return self.node_rank == 0 or self.node_rank == "0"


@dataclass(frozen=True)
class StaticAdapter:
    """A LoRA adapter the engine loads at start-up (spec.lora.loading: static)."""

    name: str
    path: str  # where the engine finds its files (a local path, or a Hub repo id)
    pinned: bool = False


@dataclass(frozen=True)
class ServingRole:
    """One role of disaggregated serving (engines/disagg.py renders its flags): the role, the
    KV transfer backend (SGLang's; vLLM always uses NixlConnector), the port the engine
    listens on (a decode pod's routing sidecar takes the engine's usual port) and SGLang's
    bootstrap port on prefill servers."""

    role: Literal["prefill", "decode"]
    port: int
    backend: str = "nixl"
    bootstrap_port: int = 8998


@dataclass(frozen=True)
class Launch:
    """What one engine process serves beyond its plan: the same record for every engine, so
    the spec's choices (model, served name, the user's extra flags, prefix caching, the node
    of a multi-node replica) travel as one value from render to the engine's flag builder."""

    model_ref: str
    served_name: str | None = None
    extra_args: tuple[str, ...] = ()  # appended last, so the user's flags win
    prefix_caching: bool | None = None  # None: the engine's default
    node: NodeRole | None = None  # None: a single-node replica
    adapters: tuple[StaticAdapter, ...] = ()  # loaded at start-up (engines/lora.py)
    serving: ServingRole | None = None  # None: aggregated (prefill and decode in one engine)
