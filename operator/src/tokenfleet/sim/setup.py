"""From CLI-style options to a sized simulator: plan the replica, take its step model."""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
from pathlib import Path

from tokenfleet.capacity import (
    PlanRequest,
    get_gpu,
    load_model,
    plan,
    step_model,
    step_timer,
)
from tokenfleet.capacity import lora as lora_capacity
from tokenfleet.capacity.disagg.link import HANDOFF_S, kv_link
from tokenfleet.capacity.disagg.roles import DecodeTimer
from tokenfleet.capacity.load import Replica
from tokenfleet.capacity.performance import StepModel
from tokenfleet.capacity.quantization import weight_format
from tokenfleet.capacity.speculative import SpeculativeRequest
from tokenfleet.capacity.types import DEFAULT_INPUT_TOKENS, DEFAULT_OUTPUT_TOKENS, Plan
from tokenfleet.capacity.validate import check_request
from tokenfleet.engines import engine
from tokenfleet.engines.lora import VLLM_RUNTIME_ENV
from tokenfleet.engines.speculative import read_native, speculative_request
from tokenfleet.errors import UserError
from tokenfleet.scheduling.core import SchedulerConfig, StepTimer
from tokenfleet.sim.lora import LoraSettings
from tokenfleet.sim.roles import KvTransfer
from tokenfleet.sim.server import SimSettings


def _positive(field: str, value: float | None) -> None:
    if value is not None and value <= 0:
        raise UserError(field, value, "must be positive", f"pass {field} greater than 0")


def _long_prefill(args: argparse.Namespace, kind: str, max_model_len: int) -> int:
    """--long-prefill-token-threshold, refused where vLLM would refuse it."""
    value: int = getattr(args, "long_prefill_token_threshold", 0) or 0
    field = "--long-prefill-token-threshold"
    if value < 0:
        raise UserError(field, value, "is negative", "pass 0 (no cap) or a token count")
    if value and not engine(kind).facts.long_prefill_cap:
        raise UserError(field, value, "is a vLLM flag", "remove it for --engine sglang")
    if value > max_model_len:
        # vLLM's SchedulerConfig refuses it at start-up.
        raise UserError(field, value, f"exceeds max-model-len {max_model_len}", "lower it")
    return value


def plan_for(args: argparse.Namespace) -> Plan:
    """The replica `tokenfleet plan` would size for the same options (concurrency 1)."""
    from tokenfleet.api.planrequest import check_cli_bounds

    for field in ("tp", "pp", "max_model_len", "max_num_seqs", "max_num_batched_tokens"):
        _positive("--" + field.replace("_", "-"), getattr(args, field, None))
    check_cli_bounds(
        {k: getattr(args, k, None) for k in ("tp", "pp", "max_model_len", "max_num_seqs")}
    )
    arch = load_model(args.model, "--model")
    # The workload only shapes the prediction, not the sizing the simulator uses; keep it
    # inside a short --max-model-len (or model context) so the planner accepts it.
    input_tokens, output_tokens = DEFAULT_INPUT_TOKENS, DEFAULT_OUTPUT_TOKENS
    context = min(args.max_model_len or arch.max_context, arch.max_context)
    if context < input_tokens + output_tokens:
        input_tokens = max(context // 2, 1)
        output_tokens = max(context // 4, 1)
    request = PlanRequest(
        arch=arch,
        gpu=get_gpu(args.gpu),
        engine=args.engine,
        engine_version=args.engine_version,
        tensor_parallel_size=args.tp,
        pipeline_parallel_size=getattr(args, "pp", None),
        max_model_len=args.max_model_len,
        max_num_seqs=getattr(args, "max_num_seqs", None),
        max_num_batched_tokens=getattr(args, "max_num_batched_tokens", None),
        kv_cache_dtype=getattr(args, "kv_cache_dtype", "auto"),
        quantization=getattr(args, "quantization", None),
        concurrency=1,
        input_tokens=input_tokens,
        output_tokens=output_tokens,
        lora=_lora_request(args),
    )
    request = dataclasses.replace(request, speculative=_speculative(args, request))
    check_request(request)
    return plan(request)


def _speculative(args: argparse.Namespace, request: PlanRequest) -> SpeculativeRequest | None:
    """--speculative-config as the engine would run it: the simulated pod runs what its
    plan rendered, so policy always (the plan already chose)."""
    raw = getattr(args, "speculative_config", None)
    rate = getattr(args, "speculative_acceptance_rate", None)
    if not raw:
        if rate is not None:
            raise UserError(
                "--speculative-acceptance-rate", rate, "needs --speculative-config", "add it"
            )
        return None
    try:
        config = json.loads(raw)
    except ValueError as error:
        raise UserError(
            "--speculative-config", raw, f"is not JSON ({error})", "pass a JSON object"
        ) from None
    if not isinstance(config, dict):
        raise UserError("--speculative-config", raw, "is not a JSON object", "pass {...}")
    method, tokens, draft_ref, rest = read_native("vllm", config, "--speculative-config")
    return speculative_request(
        request.engine,
        request.engine_version,
        method,
        tokens,
        request.arch,
        acceptance_rate=rate,
        draft_ref=draft_ref,
        policy="always",
        passthrough=rest,
        allow_paths=True,
        fields=(
            "--speculative-config",
            "--speculative-config",
            "--speculative-acceptance-rate",
            "--speculative-config",
        ),
    )


def _static_adapters(args: argparse.Namespace) -> tuple[tuple[str, str], ...]:
    out = []
    for item in getattr(args, "lora_modules", None) or []:
        name, sep, path = str(item).partition("=")
        if not sep or not name or not path:
            raise UserError(
                "--lora-modules", item, "is not NAME=PATH", "pass e.g. sql=/adapters/sql"
            )
        out.append((name, path))
    return tuple(out)


def _lora_request(args: argparse.Namespace) -> lora_capacity.LoraRequest | None:
    if not getattr(args, "enable_lora", False):
        for flag in ("max_loras", "max_lora_rank"):
            if getattr(args, flag, None) is not None:
                option = "--" + flag.replace("_", "-")
                raise UserError(option, getattr(args, flag), "needs --enable-lora", "add it")
        return None
    return lora_capacity.LoraRequest(
        adapters=len(_static_adapters(args)),
        slots=getattr(args, "max_loras", None) or 1,
        max_rank=getattr(args, "max_lora_rank", None) or lora_capacity.DEFAULT_RANK,
        slots_field="--max-loras",
        rank_field="--max-lora-rank",
    )


def _lora_settings(args: argparse.Namespace, p: Plan, step: StepModel) -> LoraSettings | None:
    """The simulated engine's adapter slots, endpoints and the LoRA kernels' step cost."""
    if p.lora is None:
        return None
    arch = p.request.arch if p.request else load_model(args.model)
    fmt = weight_format(arch.quantization_config, p.dtype, p.quantization)
    per_adapter = lora_capacity.adapter_bytes(
        arch, p.lora, p.engine, p.tensor_parallel_size, p.pipeline_parallel_size, fmt.dtype_bytes
    )
    bandwidth = step.bandwidth * 1e9 * step.bandwidth_efficiency
    root = getattr(args, "fs_root", None)
    # vLLM registers the load / unload endpoints only with this set (vllm/envs.py).
    runtime = os.environ.get(VLLM_RUNTIME_ENV, "0").strip().lower() in ("1", "true")
    return LoraSettings(
        slots=p.lora.slots,
        max_rank=p.lora.max_rank,
        runtime_updates=runtime or engine(p.engine).lora_endpoints_always,
        fs_root=Path(root) if root else None,
        static=_static_adapters(args),
        fixed_s=lora_capacity.step_seconds(arch, 0.0, bandwidth, 1),
        per_adapter_s=per_adapter / bandwidth,
    )


def settings_from_args(args: argparse.Namespace) -> tuple[SimSettings, StepTimer, str]:
    _positive("--time-scale", args.time_scale)
    _positive("--kv-cache-tokens", args.kv_cache_tokens)
    _positive("--default-max-tokens", args.default_max_tokens)
    p = plan_for(args)
    kv = args.kv_cache_tokens or p.kv_cache_tokens
    max_model_len = p.max_model_len
    block_size = engine(p.engine).block_size
    if engine(p.engine).facts.starts_below_context:
        # SGLang keeps the model's context length but caps a request at the token pool.
        max_model_len = min(max_model_len, kv)
    elif kv // block_size * block_size < max_model_len:
        # vLLM refuses to start when one max-length request does not fit the KV cache.
        raise UserError(
            "--kv-cache-tokens",
            kv,
            f"is smaller than max-model-len {max_model_len}, so vLLM would refuse to start",
            "raise --kv-cache-tokens or lower --max-model-len",
        )
    # The engine version's own scheduler: the plan's limits and the admission rules plan()
    # runs (prefix caching, whole-sequence admission, SGLang's output reservation).
    config = dataclasses.replace(
        Replica.for_plan(p),
        kv_cache_tokens=kv,
        max_model_len=max_model_len,
        long_prefill_token_threshold=_long_prefill(args, p.engine, max_model_len),
    ).scheduler_config()
    step = step_model(p)
    timer, config, transfer = _role(args, p, step_timer(p), config)
    sp = p.speculative
    settings = SimSettings(
        served_model=args.served_model_name or args.model,
        engine=args.engine,
        config=config,
        time_scale=args.time_scale,
        seed=args.seed,
        chat_default_max_tokens=args.default_max_tokens,
        engine_version=p.engine_version,
        lora=_lora_settings(args, p, step),
        speculative=(
            (sp.num_speculative_tokens, sp.acceptance_rate)
            if sp is not None and sp.enabled
            else None
        ),
        role=getattr(args, "role", None),
        kv_transfer=transfer,
    )
    summary = (
        f"tokenfleet sim: {p.model} on {p.gpus_per_replica} x {p.gpu.id} as {p.engine} "
        f"{p.engine_version} (TP {p.tensor_parallel_size} x PP {p.pipeline_parallel_size}): "
        f"kv_cache_tokens={kv} "
        f"max_num_seqs={p.max_num_seqs} max_num_batched_tokens={p.max_num_batched_tokens} "
        f"max_model_len={max_model_len} time_scale={args.time_scale}"
    )
    if p.lora is not None:
        summary += f" lora_slots={p.lora.slots} max_lora_rank={p.lora.max_rank}"
    if sp is not None and sp.enabled:
        summary += (
            f" speculative={sp.method} k={sp.num_speculative_tokens} "
            f"acceptance={sp.acceptance_rate:.2f}"
        )
    if settings.role is not None:
        summary += f" role={settings.role}"
    return settings, timer, summary


def _role(
    args: argparse.Namespace, p: Plan, timer: StepTimer, config: SchedulerConfig
) -> tuple[StepTimer, SchedulerConfig, KvTransfer | None]:
    """--role decode: a landing is timed as one more decoding sequence over the plan's prompt
    length, a step takes every landing whole (no chunking), never a separate prefill batch,
    and each landing records its KV transfer (--kv-network-gbps, or the catalog's NIC).
    --role prefill changes no timing (the server caps each request at one token)."""
    role = getattr(args, "role", None)
    gbit = getattr(args, "kv_network_gbps", None)
    if gbit is not None and role != "decode":
        raise UserError("kv-network-gbps", gbit, "applies to --role decode", "add --role decode")
    if role != "decode":
        return timer, config, None
    prompt = p.request.input_tokens if p.request is not None else DEFAULT_INPUT_TOKENS
    budget = max(config.max_num_batched_tokens, config.max_num_seqs * (config.max_model_len + 1))
    link = kv_link(p.gpu, "network", gbit)
    transfer = KvTransfer(HANDOFF_S, p.kv_bytes_per_token, link.bytes_per_second)
    landing = dataclasses.replace(
        config, max_num_batched_tokens=budget, mixed_prefill=True, long_prefill_token_threshold=0
    )
    return DecodeTimer(timer, prompt), landing, transfer
