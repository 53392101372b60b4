"""`tokenfleet plan`: size a deployment and explain it (table for people, JSON/YAML for tools)."""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import sys
from typing import Any, cast

from tokenfleet.capacity import Plan, PlanRequest, load_model, plan
from tokenfleet.capacity.benchmark import BenchmarkRun
from tokenfleet.capacity.catalog import served_model
from tokenfleet.capacity.disagg.request import ServingMode, ServingRequest, TransferBackend
from tokenfleet.capacity.engine_profiles import DEFAULT_VERSIONS, ENGINE_FACTS, engine_facts
from tokenfleet.capacity.load import Procedure
from tokenfleet.capacity.lora import LoraRequest
from tokenfleet.capacity.quantization import QUANTIZATIONS
from tokenfleet.capacity.speculative import SpeculativeRequest
from tokenfleet.capacity.types import (
    DEFAULT_CONCURRENCY,
    DEFAULT_INPUT_TOKENS,
    DEFAULT_OUTPUT_TOKENS,
    DEFAULT_TPOT_SLO_MS,
    DEFAULT_TTFT_SLO_MS,
    GIB,
)
from tokenfleet.commands.gpu_table import choice_lines, parse_gpus
from tokenfleet.commands.serving_view import add_role_commands, command_lines, serving_lines
from tokenfleet.errors import UserError


def add_arguments(p: argparse.ArgumentParser, name: str) -> None:
    p.add_argument(
        "--model", required=True, help="catalog id (tokenfleet models) or config.json path"
    )
    p.add_argument(
        "--model-id",
        help="Hugging Face id or directory the engine serves (default: the catalog id; with a "
        "config.json path: that file's directory)",
    )
    p.add_argument(
        "--gpu",
        required=True,
        help="GPU type (tokenfleet gpus), or several to compare and choose from: "
        "l4,l40s,h100-sxm (each may carry its price per GPU-hour: h100-sxm=2.49)",
    )
    p.add_argument(
        "--engine", choices=("vllm", "sglang"), default="vllm", help="default: %(default)s"
    )
    p.add_argument(
        "--engine-version",
        help=f"default: vllm {DEFAULT_VERSIONS['vllm']}, sglang {DEFAULT_VERSIONS['sglang']}",
    )
    p.add_argument("--tp", type=int, help="fixed tensor-parallel size")
    p.add_argument(
        "--pp",
        type=_pp_arg,
        help="fixed pipeline-parallel size, or 'auto' to let the planner add stages to a "
        "fixed --tp (without it, a fixed --tp gets one stage)",
    )
    p.add_argument("--gpu-memory-utilization", type=float, help="vLLM memory fraction")
    p.add_argument("--mem-fraction-static", type=float, help="SGLang memory fraction")
    p.add_argument(
        "--max-model-len",
        type=int,
        help="context length (default: the model's, lowered to what the KV cache holds)",
    )
    p.add_argument("--max-num-batched-tokens", type=int)
    p.add_argument("--max-num-seqs", type=int)
    p.add_argument(
        "--kv-cache-dtype", choices=("auto", "fp8"), default="auto", help="default: %(default)s"
    )
    p.add_argument("--dtype", default="auto", help="weight/activation dtype (auto = bfloat16)")
    p.add_argument("--quantization", choices=QUANTIZATIONS, help="override the checkpoint's")
    p.add_argument(
        "--expert-parallel",
        action="store_true",
        help="MoE: whole experts on the TP ranks (vLLM --enable-expert-parallel, SGLang --ep-size)",
    )
    p.add_argument(
        "--cap-long-prefills",
        action="store_true",
        help="vLLM 0.32+: cap a long prompt's prefill per step while others wait "
        "(--long-prefill-token-threshold, derived from --tpot-slo-ms)",
    )
    p.add_argument(
        "--concurrency",
        type=int,
        default=DEFAULT_CONCURRENCY,
        help="target concurrent requests per replica (textbook: batch size; default: %(default)s)",
    )
    p.add_argument(
        "--input-tokens",
        type=int,
        default=DEFAULT_INPUT_TOKENS,
        help="typical prompt length (default: %(default)s)",
    )
    p.add_argument(
        "--output-tokens",
        type=int,
        default=DEFAULT_OUTPUT_TOKENS,
        help="typical output length (default: %(default)s)",
    )
    p.add_argument(
        "--ttft-slo-ms",
        type=float,
        default=DEFAULT_TTFT_SLO_MS,
        help="time-to-first-token SLO (default: %(default)g ms)",
    )
    p.add_argument(
        "--prefix-hit-rate",
        type=float,
        default=0.0,
        help="share of prompt tokens served from the engines' prefix cache (0-0.95): "
        "prefill computes only the rest (default: %(default)g)",
    )
    p.add_argument(
        "--tpot-slo-ms",
        type=float,
        default=DEFAULT_TPOT_SLO_MS,
        help="time-per-output-token SLO (default: %(default)g ms)",
    )
    p.add_argument(
        "--max-gpus-per-node", type=int, help="default: the GPU type's (tokenfleet gpus)"
    )
    p.add_argument(
        "--max-nodes",
        type=int,
        default=4,  # a replica spanning more nodes is rare enough to be asked for explicitly
        help="most nodes one replica may span (default: %(default)s)",
    )
    p.add_argument(
        "--objective",
        choices=("cost", "min-gpus", "latency"),
        default="cost",
        help="cost: the layout with the lowest GPU cost per good request (GPUs x price / "
        "goodput within the SLO; ties to fewer GPUs), or the cheapest fleet for --target-rps; "
        "min-gpus: fewest GPUs per replica that hold --concurrency; latency: spend GPUs on "
        "speed (default: %(default)s)",
    )
    p.add_argument(
        "--target-rps",
        type=float,
        help="requests/s the whole fleet must serve within the SLO: compare layouts "
        "(TP 1 x N, TP 2 x N/2, ...) and pick the cheapest",
    )
    p.add_argument(
        "--serving",
        choices=("aggregated", "disaggregated", "auto"),
        default="aggregated",
        help="aggregated: one engine per replica does prefill and decode; disaggregated: a "
        "prefill role and a decode role joined by a KV transfer; auto: the cheaper per good "
        "request (default: %(default)s)",
    )
    p.add_argument(
        "--kv-link",
        choices=("network", "nvlink"),
        default="network",
        help="disaggregated: the link the KV crosses between the roles' pods: network (the "
        "node NIC, the GPU catalog's) or nvlink (both roles on one node) (default: %(default)s)",
    )
    p.add_argument(
        "--kv-network-gbps",
        type=float,
        help="disaggregated: the node network in Gb/s per GPU (e.g. 400 for RDMA, 100 for TCP "
        "on 100 GbE); default: the GPU catalog's",
    )
    p.add_argument("--prefill-tp", type=int, help="disaggregated: fixed prefill TP size")
    p.add_argument("--decode-tp", type=int, help="disaggregated: fixed decode TP size")
    p.add_argument(
        "--transfer-backend",
        choices=("nixl", "mooncake"),
        default="nixl",
        help="disaggregated SGLang: --disaggregation-transfer-backend (vLLM always uses "
        "NixlConnector) (default: %(default)s)",
    )
    p.add_argument(
        "--benchmark",
        choices=("steady", "closed-loop", "burst", "poisson"),
        default="steady",
        help="what to predict: steady (default) is --concurrency clients in their steady state "
        "(warm-up not counted); closed-loop, burst and poisson predict a benchmark run as "
        "`vllm bench serve` runs it (--max-concurrency C / --request-rate inf / --request-rate "
        "R, --num-prompts N, every request counted), beside the steady state",
    )
    p.add_argument(
        "--num-prompts",
        type=int,
        default=1000,
        help="requests in the --benchmark run (default: %(default)s, vllm bench serve's)",
    )
    p.add_argument("--request-rate", type=float, help="requests/s of --benchmark poisson")
    p.add_argument("--price-per-gpu-hour", type=float, help="override the catalog price (USD)")
    lora = p.add_argument_group("LoRA adapters (any of these turns the slots on)")
    lora.add_argument(
        "--lora-slots", type=int, help="adapters on the GPU at once (default: from --lora-adapters)"
    )
    lora.add_argument(
        "--lora-rank",
        type=int,
        help="largest adapter rank (vLLM: 1, 8, 16, 32, 64, ...; default 16)",
    )
    lora.add_argument(
        "--lora-adapters", type=int, help="adapters served (the default slots are chosen from it)"
    )
    spec = p.add_argument_group("speculative decoding")
    spec.add_argument(
        "--speculative",
        choices=("eagle3", "eagle", "mtp", "draft_model", "ngram"),
        help="plan with this proposer: the draft's weights and KV in the memory table, each "
        "step verifying K+1 tokens per sequence; left off where it lowers goodput",
    )
    spec.add_argument(
        "--num-speculative-tokens", type=int, default=3, help="K (default: %(default)s)"
    )
    spec.add_argument(
        "--acceptance-rate",
        type=float,
        help="share of draft tokens accepted (0-1; default: the method's published prior)",
    )
    spec.add_argument(
        "--draft-model",
        help="draft model / EAGLE head: a catalog id or config.json (EAGLE heads outside the "
        "catalog are shaped after the target's layer); the name the engine loads",
    )
    spec.add_argument(
        "--speculative-policy",
        choices=("auto", "always"),
        default="auto",
        help="auto: leave it off where it lowers goodput; always: run it (default: %(default)s)",
    )
    p.add_argument(
        "--breakdown",
        choices=("textbook", "speculative"),
        help="textbook: the source material's memory formula; speculative: the TPOT speed-up "
        "by batch size beside the seed formula (with --speculative)",
    )
    p.add_argument(
        "-o",
        "--output",
        choices=("table", "json", "yaml"),
        default="table",
        help="default: %(default)s",
    )


def _pp_arg(value: str) -> int | str:
    if value == "auto":
        return value
    try:
        return int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"--pp {value!r}: use an integer or 'auto'") from None


# Whose flag each engine's memory flag is, for the error that names it.
_FLAG_OWNER = {"vllm": "a vLLM flag", "sglang": "an SGLang flag"}


def _memory_fraction(args: argparse.Namespace) -> float | None:
    """The share of GPU memory asked for, by the engine's own flag; the other engines'
    flags are refused."""
    own = engine_facts(args.engine).memory_flag
    for kind, facts in ENGINE_FACTS.items():
        value = getattr(args, facts.memory_flag.replace("-", "_"))
        if facts.memory_flag != own and value is not None:
            fix = f"use --{own} with --engine {args.engine}"
            raise UserError(facts.memory_flag, value, f"is {_FLAG_OWNER[kind]}", fix)
    fraction: float | None = getattr(args, own.replace("-", "_"))
    return fraction


def request_from_args(args: argparse.Namespace) -> PlanRequest:
    from tokenfleet.api.planrequest import check_cli_bounds
    from tokenfleet.capacity.validate import check_request

    # "--pp auto" is not a number to bound: only a fixed stage count is checked.
    check_cli_bounds({**vars(args), "pp": None if args.pp == "auto" else args.pp})
    fraction = _memory_fraction(args)
    arch = load_model(args.model)
    if getattr(args, "model_id", None):
        arch = dataclasses.replace(arch, name=args.model_id)  # name the plan after what runs
    candidates = parse_gpus(args.gpu, args.price_per_gpu_hour)
    request = PlanRequest(
        arch=arch,
        gpu=candidates[0].gpu,
        gpu_candidates=candidates if len(candidates) > 1 else (),
        engine=args.engine,
        engine_version=args.engine_version,
        tensor_parallel_size=args.tp,
        pipeline_parallel_size=None if args.pp == "auto" else args.pp,
        pipeline_auto=args.pp == "auto",
        memory_fraction=fraction,
        max_model_len=args.max_model_len,
        max_num_batched_tokens=args.max_num_batched_tokens,
        max_num_seqs=args.max_num_seqs,
        kv_cache_dtype=args.kv_cache_dtype,
        dtype=args.dtype,
        quantization=args.quantization,
        expert_parallel=args.expert_parallel,
        cap_long_prefills=args.cap_long_prefills,
        concurrency=args.concurrency,
        input_tokens=args.input_tokens,
        output_tokens=args.output_tokens,
        prefix_cache_hit_rate=args.prefix_hit_rate,
        ttft_slo_ms=args.ttft_slo_ms,
        tpot_slo_ms=args.tpot_slo_ms,
        max_gpus_per_node=args.max_gpus_per_node,
        max_nodes=args.max_nodes,
        objective=args.objective,
        target_requests_per_second=args.target_rps,
        lora=lora_request(args),
        speculative=speculative_request_from_args(args, arch),
        serving=serving_from_args(args),
    )
    check_request(request)
    return request


def speculative_request_from_args(args: argparse.Namespace, arch: Any) -> SpeculativeRequest | None:
    from tokenfleet.engines.speculative import speculative_request

    method = getattr(args, "speculative", None)
    if method is None:
        for flag in ("acceptance_rate", "draft_model"):
            if getattr(args, flag, None) is not None:
                option = "--" + flag.replace("_", "-")
                raise UserError(option, getattr(args, flag), "needs --speculative", "add it")
        return None
    return speculative_request(
        args.engine,
        args.engine_version,
        method,
        args.num_speculative_tokens,
        arch,
        acceptance_rate=args.acceptance_rate,
        draft_ref=args.draft_model,
        policy=args.speculative_policy,
        allow_paths=True,
    )


def lora_request(args: argparse.Namespace) -> LoraRequest | None:
    slots, rank, adapters = args.lora_slots, args.lora_rank, args.lora_adapters
    if slots is None and rank is None and adapters is None:
        return None
    if adapters is not None and adapters < 0:
        raise UserError("lora-adapters", adapters, "must not be negative", "pass 0 or more")
    return LoraRequest(adapters=adapters or 0, slots=slots, max_rank=rank)


def serving_from_args(args: argparse.Namespace) -> ServingRequest:
    """--serving and the flags that only mean something with disaggregated roles."""
    mode = cast(ServingMode, getattr(args, "serving", "aggregated"))
    role_flags = {
        "kv-network-gbps": getattr(args, "kv_network_gbps", None),
        "prefill-tp": getattr(args, "prefill_tp", None),
        "decode-tp": getattr(args, "decode_tp", None),
    }
    if mode == "aggregated":
        for flag, value in role_flags.items():
            if value is not None:
                raise UserError(
                    flag, value, "applies to disaggregated serving",
                    "add --serving disaggregated or --serving auto, or drop it",
                )  # fmt: skip
    for flag in ("prefill-tp", "decode-tp"):
        value = role_flags[flag]
        if value is not None and value < 1:
            raise UserError(flag, value, "must be at least 1", "use 1, 2, 4 or 8")
    backend: TransferBackend = getattr(args, "transfer_backend", "nixl")
    if backend not in engine_facts(args.engine).transfer_backends:
        raise UserError(
            "transfer-backend", backend, "is SGLang's; vLLM uses NixlConnector",
            "drop --transfer-backend, or use --engine sglang",
        )  # fmt: skip
    return ServingRequest(
        mode=mode,
        link=getattr(args, "kv_link", "network"),
        network_gbit=role_flags["kv-network-gbps"],
        prefill_tp=role_flags["prefill-tp"],
        decode_tp=role_flags["decode-tp"],
        backend=backend,
    )


def plan_document(p: Plan, model_ref: str) -> dict[str, Any]:
    from tokenfleet.engines import Launch, engine_args, engine_command

    doc = p.as_dict()
    launch = Launch(model_ref)
    doc["engineArgs"] = engine_args(p, launch)
    doc["engineCommand"] = engine_command(p, launch)
    if not engine_facts(p.engine).profile_run:
        # SGLang's split: weights + kvCache = staticPool = mem-fraction-static x freeAtStart;
        # "activation" is the rest of freeAtStart, "overhead" what was taken before it.
        m = p.memory
        doc["memory"]["staticPool"] = round(m.budget / GIB, 2)
        doc["memory"]["freeAtStart"] = round((m.budget + m.activation) / GIB, 2)
    add_role_commands(doc, p, model_ref)
    return doc


def run(args: argparse.Namespace) -> int:
    req = request_from_args(args)
    if args.breakdown == "textbook":
        from tokenfleet.commands.textbook_view import print_textbook

        print_textbook(req, args.output)
        return 0
    if args.breakdown == "speculative":
        from tokenfleet.commands.speculative_view import print_speedup

        print_speedup(req, args.output)
        return 0
    from tokenfleet.api.planrequest import check_fleet_size

    procedure = _benchmark_args(args)
    p = plan(req)
    check_fleet_size(p)
    model_ref, note = served_model(args.model, args.model_id)
    doc = plan_document(p, model_ref)
    if note:
        doc["warnings"].append(note)
    run_ = None
    if procedure is not None:
        from tokenfleet.capacity.benchmark import predict_for_plan

        run_ = predict_for_plan(p, procedure, args.num_prompts, request_rate=args.request_rate)
        doc["benchmark"] = benchmark_document(run_)
    if args.output == "json":
        json.dump(doc, sys.stdout, indent=2)
        print()
    elif args.output == "yaml":
        import yaml

        yaml.safe_dump(doc, sys.stdout, sort_keys=False)
    else:
        print(render_table(p, doc, run_))
    return 0


def _benchmark_args(args: argparse.Namespace) -> Procedure | None:
    """--benchmark's procedure (None: the steady state only), its flags checked."""
    procedure: str = getattr(args, "benchmark", "steady")
    rate = getattr(args, "request_rate", None)
    if getattr(args, "num_prompts", 1) < 1:
        raise UserError("num-prompts", args.num_prompts, "must be at least 1", "e.g. 1000")
    if procedure == "poisson" and not (rate is not None and rate > 0 and math.isfinite(rate)):
        raise UserError(
            "request-rate", rate, "--benchmark poisson needs a finite rate above 0",
            "pass --request-rate R in requests/s (--benchmark burst sends all at once)",
        )  # fmt: skip
    if rate is not None and procedure != "poisson":
        raise UserError(
            "request-rate", rate, f"applies to --benchmark poisson, not {procedure}",
            "add --benchmark poisson, or drop --request-rate",
        )  # fmt: skip
    if procedure == "steady":
        return None
    return cast(Procedure, procedure)


def benchmark_document(run: BenchmarkRun) -> dict[str, Any]:
    def ms(value: float | None) -> float | None:
        return None if value is None else round(value * 1e3, 2)

    return {
        "procedure": run.procedure,
        "command": f"vllm bench serve {run.command}",
        "numPrompts": run.num_prompts,
        "maxConcurrency": run.concurrency,
        "requestRate": run.request_rate,
        "ttftMeanMs": ms(run.ttft_mean_s),
        "ttftMedianMs": ms(run.ttft_p50_s),
        "ttftP99Ms": ms(run.ttft_p99_s),
        "tpotMeanMs": ms(run.tpot_mean_s),
        "tpotMedianMs": ms(run.tpot_p50_s),
        "outputTokensPerSecond": round(run.output_tokens_per_second, 2),
        "requestsPerSecond": round(run.requests_per_second, 4),
    }


def benchmark_lines(run: BenchmarkRun, input_tokens: int, output_tokens: int) -> list[str]:
    if run.procedure == "closed-loop":
        what = f"{run.concurrency} clients all starting at once"
    elif run.procedure == "burst":
        what = "every request sent at once"
    else:
        what = f"Poisson arrivals at {run.request_rate or 0:g} req/s"

    def median(value: float | None) -> str:
        return "" if value is None else f", median {value * 1e3:.1f}"

    return [
        f"  benchmark     vllm bench serve {run.command} ({what}, {input_tokens} in / "
        f"{output_tokens} out, every request counted)",
        f"    mean TTFT          {run.ttft_mean_s * 1e3:8.1f} ms{median(run.ttft_p50_s)}"
        + (f", p99 {run.ttft_p99_s * 1e3:.1f}" if run.ttft_p99_s is not None else ""),
        f"    mean TPOT          {run.tpot_mean_s * 1e3:8.1f} ms{median(run.tpot_p50_s)}",
        f"    throughput         {run.output_tokens_per_second:8.1f} output tok/s "
        f"({run.requests_per_second:.2f} req/s)",
    ]


def _fleet_lines(p: Plan) -> list[str]:
    """The fleet for --target-rps: the chosen layout and the alternatives it beat."""
    if p.fleet is None:
        return []
    f = p.fleet
    c = f.chosen
    lines = [
        "",
        f"  fleet         {c.replicas} x TP {c.tensor_parallel_size} x PP "
        f"{c.pipeline_parallel_size} = {c.total_gpus} GPU(s) for {f.target_requests_per_second:g} "
        f"req/s within the SLO, ${c.cost_per_hour:.2f}/hour",
        f"    {'layout':<14}{'replicas':>9}{'GPUs':>6}{'goodput req/s':>15}{'p95 TTFT ms':>13}"
        f"{'TPOT ms':>9}{'$/hour':>9}{'$/1M good':>11}   (TTFT / TPOT at the target rate)",
    ]
    for o in (c, *f.alternatives):
        mark = "  <- chosen" if o is c else ""
        layout = f"TP {o.tensor_parallel_size} x PP {o.pipeline_parallel_size}"
        lines.append(
            f"    {layout:<14}{o.replicas:>9}{o.total_gpus:>6}"
            f"{o.goodput_requests_per_second * o.replicas:>15.2f}{o.ttft_p95_ms:>13.0f}"
            f"{o.tpot_ms:>9.1f}{o.cost_per_hour:>9.2f}{o.cost_per_million_good_requests:>11.2f}"
            f"{mark}"
        )
    return lines


def render_table(p: Plan, doc: dict[str, Any], run: BenchmarkRun | None = None) -> str:
    pr, req = p.predicted, p.request
    assert req is not None
    facts = engine_facts(p.engine)
    flag = facts.memory_flag
    lines = [
        f"{p.model} on {p.gpu.name} ({p.gpu.id}), {p.engine} {p.engine_version} "
        f"[profile {p.engine_profile}]",
        "",
        f"  layout        TP {p.tensor_parallel_size} x PP {p.pipeline_parallel_size} = "
        f"{p.gpus_per_replica} GPU(s) on {p.nodes_per_replica} node(s) per replica",
        f"  why           {p.reason.split(': ', 1)[-1]}",
        f"  model         {p.params_total / 1e9:.2f} B params ({p.params_active / 1e9:.2f} B "
        f"active), {p.weights_total_bytes / GIB:.1f} GiB of weights"
        + (f", {p.quantization}" if p.quantization else ""),
        f"  settings      {flag} {p.memory_fraction}, max-model-len {p.max_model_len:,}, "
        f"max-num-seqs {p.max_num_seqs}, max-num-batched-tokens {p.max_num_batched_tokens:,}, "
        f"kv-cache-dtype {p.kv_cache_dtype}"
        + (", expert-parallel" if p.expert_parallel else "")
        + (
            f", long-prefill-token-threshold {p.long_prefill_token_threshold:,} (a long prompt's "
            f"chunk per step beside others: one step within tpot {req.tpot_slo_ms:g} ms)"
            if p.long_prefill_token_threshold
            else ""
        ),
        "",
        *(vllm_memory_lines(p) if facts.profile_run else sglang_memory_lines(p)),
        "",
        f"  KV cache      {p.kv_cache_tokens:,} tokens ({p.kv_bytes_per_token:,} B/token per GPU); "
        f"{p.max_concurrency:.2f} requests of {p.max_model_len:,} tokens at once",
        f"  predicted     {req.concurrency} concurrent clients (closed loop, steady state: "
        f"warm-up not counted), {req.input_tokens} in / {req.output_tokens} out, from the "
        "engine's scheduler run in virtual time"
        + ("" if run else "; --benchmark predicts a benchmark run instead"),
        f"    TTFT               {pr.ttft_ms:8.1f} ms median, p95 {pr.ttft_p95_ms:.1f}, p99 "
        f"{pr.ttft_p99_ms:.1f}",
        f"    TPOT               {pr.tpot_ms:8.1f} ms median (ITL {pr.itl_ms:.1f} ms median)",
        f"    throughput         {pr.output_tokens_per_second:8.1f} output tok/s "
        f"({pr.total_tokens_per_second:.0f} total, {pr.requests_per_second:.2f} req/s at "
        f"{req.concurrency} concurrent)",
        f"    goodput capacity   {pr.goodput_requests_per_second:8.2f} req/s: the highest Poisson "
        f"rate at which 95% of requests meet TTFT {req.ttft_slo_ms:g} ms and TPOT "
        f"{req.tpot_slo_ms:g} ms",
        f"                                (there: p95 TTFT {pr.goodput_ttft_p95_ms:.0f} ms, TPOT "
        f"{pr.goodput_tpot_ms:.1f} ms, ~{pr.goodput_concurrency} in flight; saturation "
        f"{pr.saturation_requests_per_second:.2f} req/s)",
        f"    cost               {pr.cost_per_million_output_tokens:8.2f} $ per 1M output tokens "
        f"at ${p.gpu.price_per_hour:.2f}/GPU-hour",
        *speculative_lines(p),
        *(_fleet_lines(p) if p.serving is None else []),
        *serving_lines(p),
        *(["", *benchmark_lines(run, req.input_tokens, req.output_tokens)] if run else []),
        *(choice_lines(p.choice) if p.choice is not None else []),
        "",
        *command_lines(doc),
    ]
    if doc["warnings"]:
        lines += ["", "  warnings"] + [f"    - {w}" for w in doc["warnings"]]
    return "\n".join(lines)


def vllm_memory_lines(p: Plan) -> list[str]:
    """vLLM: everything it profiles sits inside total x gpu-memory-utilization (the budget);
    CUDA graphs inside it from 0.21, outside before."""
    m = p.memory
    graphs = "inside" if m.cuda_graphs_in_budget else "outside"
    return [
        "  memory per GPU            GiB",
        f"    weights            {m.weights / GIB:8.2f}",
        f"    activation         {m.activation / GIB:8.2f}",
        f"    overhead           {m.overhead / GIB:8.2f}   non-torch {m.non_torch / GIB:.2f}, "
        f"CUDA graphs {m.cuda_graphs / GIB:.2f} ({graphs} the budget)",
        *_lora_line(p, "    LoRA slots         "),
        *_draft_line(p, "    draft              "),
        f"    KV cache           {m.kv_cache / GIB:8.2f}",
        f"    total              {m.total / GIB:8.2f}   budget {m.budget / GIB:.2f} of "
        f"{p.gpu.memory_gib:.2f}",
    ]


def _lora_note(p: Plan) -> str:
    """The slots behind the LoRA row, and the KV tokens they take."""
    lora = p.lora
    assert lora is not None
    slots = lora.engine_slots(p.engine)
    flags = engine_facts(p.engine).lora_slots_flag
    chosen = ", chosen for the adapters listed" if lora.chosen else ""
    displaced = int(p.memory.lora // max(p.kv_bytes_per_token, 1))
    return f"{flags} {slots} x rank {lora.max_rank}{chosen}: {displaced:,} KV tokens"


def _draft_line(p: Plan, label: str) -> list[str]:
    sp = p.speculative
    if sp is None or not p.memory.draft:
        return []
    return [
        f"{label}{p.memory.draft / GIB:8.2f}   {sp.method} weights; its KV adds "
        f"{sp.draft_kv_bytes_per_token:,} B/token ({sp.kv_tokens_without:,} KV tokens "
        "without it)"
    ]


def speculative_lines(p: Plan) -> list[str]:
    sp = p.speculative
    if sp is None:
        return []
    state = "on" if sp.enabled else "off (it lowers goodput here; --speculative-policy always)"
    cross = (
        f"from batch {sp.crossover_batch}"
        if sp.crossover_batch is not None
        else f"at no batch up to {p.max_num_seqs}"
    )
    return [
        "",
        f"  speculation   {sp.method}, K={sp.num_speculative_tokens}: {state}",
        f"    acceptance         {sp.acceptance_rate:8.2f}   {sp.rate_source}",
        f"    tokens per step    {sp.tokens_per_step:8.2f}   (1 - a^(K+1)) / (1 - a)",
        f"    TPOT               {sp.tpot_with_ms:8.1f} ms with, {sp.tpot_without_ms:.1f} without "
        f"({sp.tpot_speedup:.2f}x) at {p.request.concurrency if p.request else 0} concurrent",
        f"    goodput            {sp.goodput_with:8.2f} req/s with, {sp.goodput_without:.2f} "
        "without (same layout)",
        f"    stops paying       a speculative token costs more than a plain one {cross}",
    ]


def _lora_line(p: Plan, label: str) -> list[str]:
    if p.lora is None:
        return []
    return [f"{label}{p.memory.lora / GIB:8.2f}   {_lora_note(p)}"]


def sglang_memory_lines(p: Plan) -> list[str]:
    """SGLang's own accounting (reference/engines.md): of the memory free when it starts
    (the GPU less the CUDA context and NCCL), mem-fraction-static is the static pool that
    holds the weights and the KV pool; the rest is left to activations and CUDA graphs,
    which SGLang does not size one by one. The lines add up to the GPU's memory."""
    m = p.memory
    rest = m.activation  # memory.py keeps SGLang's (1 - mem_fraction_static) share here
    rows = [
        ("CUDA context + NCCL at start", m.non_torch, ""),
        (
            f"static pool (mem-fraction-static {p.memory_fraction:g})",
            m.budget,
            f"   of the {(m.budget + rest) / GIB:.2f} free at start",
        ),
        ("  weights", m.weights, ""),
        *([("  draft weights", m.draft, "")] if m.draft else []),
        *([("  LoRA pool", m.lora, "   " + _lora_note(p))] if p.lora is not None else []),
        ("  KV cache pool", m.kv_cache, ""),
        ("the rest: activations, CUDA graphs", rest, ""),
        ("total", m.total, f"   the GPU's {p.gpu.memory_gib:.2f}"),
    ]
    return ["  memory per GPU (SGLang)" + " " * 24 + "GiB"] + [
        f"    {label:<40}{value / GIB:8.2f}{note}" for label, value, note in rows
    ]
