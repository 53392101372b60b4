"""Checks on a PlanRequest that every caller needs (the CLI, the operator, the simulator).

plan() itself checks what it must to compute (positive counts, a context that holds the
request); these catch inputs it would accept but that cannot describe a real deployment:
a request longer than the model's context, an engine version no profile describes, and a
--quantization the checkpoint cannot be loaded with. Pure.

`names` says what the caller calls each input: CLI flags (CLI_NAMES) or spec fields
(tokenfleet.api.planrequest passes spec.workload.inputTokens ...), so the error a person
sees names the knob they actually have.
"""

from __future__ import annotations

from collections.abc import Mapping

from tokenfleet.capacity.engine_profiles import (
    DEFAULT_VERSIONS,
    engine_facts,
    engine_profile,
    parse_version,
)
from tokenfleet.capacity.errors import PlanError
from tokenfleet.capacity.long_prefill import LONE_REQUEST_EXEMPT_SINCE
from tokenfleet.capacity.types import PlanRequest

CLI_NAMES: Mapping[str, str] = {
    "input_tokens": "--input-tokens",
    "output_tokens": "--output-tokens",
    "max_model_len": "--max-model-len",
    "engine_version": "--engine-version",
    "quantization": "--quantization",
    "expert_parallel": "--expert-parallel",
    "cap_long_prefills": "--cap-long-prefills",
}

# Methods the engine applies to unquantized (bf16) weights while loading them (vLLM's and
# SGLang's dynamic fp8); every other method needs a checkpoint stored in that format.
ONLINE_QUANTIZATION = frozenset({"fp8"})
# Kernel variants that load the same checkpoint format (vLLM picks Marlin for AWQ / GPTQ).
_FAMILY = {"awq_marlin": "awq", "gptq_marlin": "gptq"}


def _field(names: Mapping[str, str], key: str) -> str:
    """The name in an error's `field=value` position: flags without their dashes, as the
    planner's own errors write them."""
    return names[key].lstrip("-")


def check_request(req: PlanRequest, names: Mapping[str, str] = CLI_NAMES) -> None:
    """Raise a PlanError naming the input (in `names`' words) and the fix."""
    _check_context(req, names)
    _check_engine_version(req, names)
    _check_quantization(req, names)
    _check_expert_parallel(req, names)
    _check_long_prefill_cap(req, names)


def _check_long_prefill_cap(req: PlanRequest, names: Mapping[str, str]) -> None:
    if not req.cap_long_prefills:
        return
    version = req.engine_version or DEFAULT_VERSIONS[req.engine]
    capped = engine_facts(req.engine).long_prefill_cap
    if not capped or parse_version(version) < LONE_REQUEST_EXEMPT_SINCE:
        since = ".".join(map(str, LONE_REQUEST_EXEMPT_SINCE))
        raise PlanError(
            _field(names, "cap_long_prefills"),
            True,
            f"needs vLLM {since} or newer (--long-prefill-token-threshold with the lone-request "
            f"exemption); the engine is {req.engine} {version}",
            f"remove {names['cap_long_prefills']} or use vLLM {since}+",
        )


def _check_expert_parallel(req: PlanRequest, names: Mapping[str, str]) -> None:
    if req.expert_parallel and req.arch.moe is None:
        raise PlanError(
            _field(names, "expert_parallel"),
            True,
            f"{req.arch.name} is a dense model: it has no experts to place on the ranks",
            f"remove {names['expert_parallel']}",
        )


def _check_context(req: PlanRequest, names: Mapping[str, str]) -> None:
    context = req.arch.max_context
    if req.max_model_len and req.max_model_len > context:
        # vLLM refuses a --max-model-len above the config's max_position_embeddings at
        # start-up (the pod would crash-loop); SGLang likewise without an override.
        raise PlanError(
            _field(names, "max_model_len"),
            req.max_model_len,
            f"exceeds the {context:,}-token context of {req.arch.name} (max_position_embeddings)",
            f"lower {names['max_model_len']} to {context:,} or less, or leave it unset",
        )
    tokens = req.input_tokens + req.output_tokens
    if tokens <= context:
        return
    key = "input_tokens" if req.input_tokens > req.output_tokens else "output_tokens"
    raise PlanError(
        _field(names, key),
        getattr(req, key),
        f"{req.input_tokens:,} input + {req.output_tokens:,} output tokens exceed the "
        f"{context:,}-token context of {req.arch.name}",
        f"lower {names['input_tokens']} / {names['output_tokens']} to {context:,} tokens together",
    )


def newest_known_version(engine: str) -> tuple[int, int]:
    """(major, minor) of the newest release the profiles were written for: the default."""
    major, minor, _ = parse_version(DEFAULT_VERSIONS[engine])
    return major, minor


def _check_engine_version(req: PlanRequest, names: Mapping[str, str]) -> None:
    if req.engine_version is None or req.engine not in DEFAULT_VERSIONS:
        return
    major, minor, _ = parse_version(req.engine_version, _field(names, "engine_version"))
    newest = newest_known_version(req.engine)
    if (major, minor) <= newest:
        return
    default = DEFAULT_VERSIONS[req.engine]
    profile = engine_profile(req.engine, default).name
    raise PlanError(
        _field(names, "engine_version"),
        req.engine_version,
        f"is newer than any {req.engine} release the capacity model knows (newest: "
        f"{newest[0]}.{newest[1]}, profile {profile}), so its memory use is unknown",
        f"use {names['engine_version']} {default} (the nearest profile) or leave it unset",
    )


def _check_quantization(req: PlanRequest, names: Mapping[str, str]) -> None:
    wanted = (req.quantization or "").lower()
    if wanted in ("", "none"):
        return
    stored = str(req.arch.quantization_config.get("quant_method") or "none").lower()
    if _FAMILY.get(wanted, wanted) == _FAMILY.get(stored, stored):
        return
    if wanted in ONLINE_QUANTIZATION and stored == "none":
        return
    checkpoint = "unquantized (no quantization_config)" if stored == "none" else stored
    fix = (
        f"use a checkpoint stored in {wanted}"
        + (
            f", or {names['quantization']} fp8 (quantized while loading)"
            if stored == "none"
            else ""
        )
        + f", or leave {names['quantization']} unset to load it as stored"
    )
    raise PlanError(
        _field(names, "quantization"),
        req.quantization,
        f"does not match the checkpoint of {req.arch.name}, which is {checkpoint}",
        fix,
    )
