"""The inference engines tokenfleet runs (vLLM, SGLang): command lines, ports, probes, metrics.

Pure: no I/O. Every flag is checked against the engines' own argument parsers by
the system test test_engine_parsers.py (needs `make engines`).

Public names:
- Launch(model_ref, served_name=None, extra_args=(), prefix_caching=None, node=None): what a
  process serves beyond its plan.
- engine_args(plan, launch) -> list[str]: what follows the program (model + flags), the
  launch's extra_args last.
- engine_command(plan, launch, program=None) -> list[str]: the full container command.
- engine_info(name) -> EngineInfo: port, health_path, metrics_path, metrics (MetricNames),
  metrics_need_flag, workers_health_since, dist_port.
- worker_serves_health(plan) -> bool: whether multi-node workers answer /health (probes).
- NodeRole(nnodes, node_rank, leader_address): one node of a multi-node replica; rank and
  address may be "$(LWS_WORKER_INDEX)" / "$(LWS_LEADER_ADDRESS)" (expanded by the kubelet).
- ENGINES: {"vllm": INFO, "sglang": INFO}; PROGRAMS: {"vllm": ("vllm", "serve"), ...}.
- REGISTRY, engine(kind) -> Engine: every fact of one engine kind in one record
  (engines/registry.py: info, program, default version, histogram buckets, memory profile).
"""

from __future__ import annotations

from collections.abc import Sequence

from tokenfleet.capacity.engine_profiles import parse_version
from tokenfleet.capacity.types import Plan
from tokenfleet.engines.registry import REGISTRY, Engine, engine
from tokenfleet.engines.types import EngineInfo, Launch, MetricNames, NodeRole, ServingRole

ENGINES: dict[str, EngineInfo] = {kind: e.info for kind, e in REGISTRY.items()}
# The default program of each engine's container command (what precedes engine_args).
PROGRAMS: dict[str, tuple[str, ...]] = {kind: e.program for kind, e in REGISTRY.items()}

__all__ = [
    "ENGINES",
    "PROGRAMS",
    "REGISTRY",
    "Engine",
    "EngineInfo",
    "Launch",
    "MetricNames",
    "NodeRole",
    "ServingRole",
    "engine",
    "engine_args",
    "engine_command",
    "engine_info",
    "worker_serves_health",
]


def engine_info(name: str) -> EngineInfo:
    return engine(name).info


def worker_serves_health(plan: Plan) -> bool:
    since = engine_info(plan.engine).workers_health_since
    return since is not None and parse_version(plan.engine_version) >= since


def engine_args(plan: Plan, launch: Launch) -> list[str]:
    """The engine's arguments after its program name, for plan.engine."""
    return engine(plan.engine).args(plan, launch)


def engine_command(plan: Plan, launch: Launch, program: Sequence[str] | None = None) -> list[str]:
    """The full container command for plan.engine (program, model, flags, extras)."""
    kind = engine(plan.engine)
    return kind.command(plan, launch, kind.program if program is None else program)
