"""`tokenfleet autoscale-sim`: replay a request trace against a modelled fleet under our
autoscaler (the operator's own policy.decide), KEDA- and HPA-style rules, a static peak
provision and the oracle. Offline and deterministic: the same options give the same JSON."""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from typing import Any

from tokenfleet.capacity.errors import PlanError
from tokenfleet.capacity.pinned import pin_layout
from tokenfleet.capacity.types import DEFAULT_TPOT_SLO_MS, DEFAULT_TTFT_SLO_MS
from tokenfleet.commands.paths import check_output_file

# The plan command's layout flags, reused as they are defined there (names, types, help).
LAYOUT_FLAGS = (
    "--engine-version",
    "--tp",
    "--pp",
    "--quantization",
    "--kv-cache-dtype",
    "--dtype",
    "--gpu-memory-utilization",
    "--mem-fraction-static",
    "--max-num-batched-tokens",
    "--max-num-seqs",
    "--expert-parallel",
    "--cap-long-prefills",
    "--max-gpus-per-node",
    "--max-nodes",
)


def _plan_parser() -> argparse.ArgumentParser:
    from tokenfleet.commands import plan

    parser = argparse.ArgumentParser(add_help=False)
    plan.add_arguments(parser, "plan")
    return parser


def add_arguments(p: argparse.ArgumentParser, name: str) -> None:
    del name
    layout = p.add_argument_group("layout (as in tokenfleet plan; ignored with -f)")
    for action in _plan_parser()._actions:
        if any(flag in LAYOUT_FLAGS for flag in action.option_strings):
            layout._add_action(action)
    p.add_argument(
        "-f",
        "--filename",
        metavar="FILE",
        help="replay your own LLMService: model, GPU, engine, layout, SLO and autoscaling "
        "are taken from the resource (its first LLMService)",
    )
    p.add_argument(
        "--trace",
        required=True,
        help="built-in steady | diurnal | spike | bursty, or an Azure LLM inference trace CSV "
        "(TIMESTAMP,ContextTokens,GeneratedTokens)",
    )
    p.add_argument(
        "--policy",
        default="all",
        help="tokenfleet | keda | hpa | static | reactive | hold | oracle | all, or a comma list",
    )
    p.add_argument("--model", default="meta-llama/Llama-3.1-8B", help="catalog id")
    p.add_argument("--gpu", default="l40s", help="GPU type (tokenfleet gpus)")
    p.add_argument("--engine", choices=("vllm", "sglang"), default="vllm")
    p.add_argument("--max-model-len", type=int, default=8192)
    p.add_argument("--ttft-slo-ms", type=float, default=DEFAULT_TTFT_SLO_MS)
    p.add_argument("--tpot-slo-ms", type=float, default=DEFAULT_TPOT_SLO_MS)
    p.add_argument(
        "--cold-start", type=float, default=120.0, help="seconds until a new replica serves"
    )
    p.add_argument(
        "--capacity-error",
        type=float,
        default=1.0,
        help="scale the capacity model's prediction our policy starts from (0.5, 2: wrong)",
    )
    p.add_argument(
        "--min-replicas",
        type=int,
        default=1,
        help="0: routed through the endpoint picker, which holds requests at zero replicas",
    )
    p.add_argument(
        "--scale-to-zero-after",
        type=int,
        default=600,
        help="with --min-replicas 0: idle seconds before the last replica goes",
    )
    p.add_argument("--max-replicas", type=int, help="default: twice the static peak provision")
    p.add_argument("--target-utilization", type=float, help="default: the operator's (0.8)")
    p.add_argument(
        "--seed", type=int, default=0, help="seed of the synthetic traces and the router"
    )
    p.add_argument(
        "--frontier",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="replay fixed fleets of 1, 2, ... replicas and print what each reaches and costs "
        "(one replay per N; --no-frontier to skip)",
    )
    p.add_argument(
        "--strict",
        action="store_true",
        help="refuse a trace with unreadable rows or requests longer than --max-model-len "
        "(default: drop them and count them in the summary)",
    )
    p.add_argument(
        "--routing",
        choices=("load", "affinity", "round-robin", "picker", "compare"),
        default="load",
        help="the router: load (power of two choices, default), affinity (the endpoint "
        "picker's prefix-cache scorer over the trace's hash_ids), round-robin (a plain "
        "Service), picker (the endpoint picker's queue, KV and prefix scorers), or compare "
        "(affinity and round robin side by side)",
    )
    p.add_argument("-o", "--output", choices=("table", "json"), default="table")
    p.add_argument("--plot", metavar="FILE.png", help="draw load, replicas and p95 TTFT over time")


def _policies(value: str) -> tuple[str, ...]:
    from tokenfleet.autoscale.fleetsim.run import POLICIES

    if value == "all":
        return POLICIES
    names = tuple(v.strip() for v in value.split(",") if v.strip())
    for name in names:
        if name not in POLICIES:
            raise PlanError(
                "--policy", name, "is not a policy", f"use one of {', '.join(POLICIES)} or all"
            )
    return names


def _layout(args: argparse.Namespace) -> tuple[Any, dict[str, Any], dict[str, Any]]:
    """(PlanRequest, spec.autoscaling, SimOptions overrides): from -f, or from the layout
    flags through the plan command's own request_from_args (its checks included)."""
    if args.filename:
        return _from_service(args.filename)
    from tokenfleet.commands.plan import request_from_args

    defaults = vars(_plan_parser().parse_args(["--model", args.model, "--gpu", args.gpu]))
    merged = {**defaults, **{k: v for k, v in vars(args).items() if k in defaults}}
    return request_from_args(argparse.Namespace(**merged)), {}, {}


def _from_service(path: str) -> tuple[Any, dict[str, Any], dict[str, Any]]:
    from tokenfleet.commands.render import load_documents, render_documents

    try:
        documents = load_documents(path)
    except UnicodeDecodeError:
        problem = "is not UTF-8 text"
        raise PlanError("--filename", path, problem, "give an LLMService YAML") from None
    rendered = render_documents(documents, path)
    if not rendered:
        raise PlanError("--filename", path, "has no LLMService", "give an LLMService YAML")
    service, p = rendered[0].service, rendered[0].plan
    spec = service.spec
    if p.request is None:  # plan_service always keeps its request; a bug otherwise
        raise RuntimeError(f"{path}: the plan lost its request")
    request = pin_layout(p.request, p)
    auto = spec.autoscaling.model_dump(by_alias=True, exclude_none=True)
    for key in ("enabled", "minReplicas", "maxReplicas", "prometheus"):
        auto.pop(key, None)
    overrides: dict[str, Any] = {
        "model": spec.model.id,
        "gpu": spec.gpu.type,
        "engine": p.engine,
        "max_model_len": p.max_model_len,
        "ttft_ms": spec.slo.ttft_ms,
        "tpot_ms": spec.slo.tpot_ms,
        "attainment": spec.slo.attainment,
        "quantile": spec.slo.quantile,
        "min_replicas": spec.autoscaling.min_replicas,
        "max_replicas": spec.autoscaling.max_replicas,
        "target_utilization": spec.autoscaling.target_utilization,
    }
    return request, auto, overrides


def run(args: argparse.Namespace) -> int:
    from tokenfleet.autoscale.fleetsim import report
    from tokenfleet.autoscale.fleetsim.frontier import frontier
    from tokenfleet.autoscale.fleetsim.run import SimOptions, run_routings
    from tokenfleet.autoscale.fleetsim.run import run as simulate
    from tokenfleet.autoscale.fleetsim.traces import load

    if args.min_replicas < 0:
        raise PlanError("--min-replicas", args.min_replicas, "must be 0 or more", "pass 0 or 1")
    for flag in ("max_replicas", "max_model_len"):
        value = getattr(args, flag)
        if value is not None and value < 1:
            raise PlanError(
                "--" + flag.replace("_", "-"), value, "must be at least 1", "pass 1 or more"
            )
    if args.max_replicas is not None and args.max_replicas < args.min_replicas:
        raise PlanError("--max-replicas", args.max_replicas, "is below --min-replicas", "raise it")
    if args.target_utilization is not None and not 0 < args.target_utilization <= 1:
        raise PlanError(
            "--target-utilization", args.target_utilization, "must be in (0, 1]", "pass e.g. 0.8"
        )
    if args.plot:
        check_output_file("--plot", args.plot, ".png")
    request, autoscaling, overrides = _layout(args)
    options = SimOptions(
        model=args.model,
        gpu=args.gpu,
        engine=args.engine,
        max_model_len=args.max_model_len,
        ttft_ms=args.ttft_slo_ms,
        tpot_ms=args.tpot_slo_ms,
        cold_start=args.cold_start,
        capacity_error=args.capacity_error,
        min_replicas=args.min_replicas,
        scale_to_zero_after=args.scale_to_zero_after,
        max_replicas=args.max_replicas,
        target_utilization=args.target_utilization,
        seed=args.seed,
        strict=args.strict,
        routing="affinity" if args.routing == "compare" else args.routing,
        request=request,
        autoscaling=autoscaling,
    )
    options = dataclasses.replace(options, **overrides)
    trace = load(args.trace, args.seed, args.strict)
    policies = _policies(args.policy)
    setup, results = simulate(trace, options, policies)
    by_routing = {options.routing: results}
    if args.routing == "compare":
        by_routing.update(run_routings(setup, policies, ("round-robin",)))
    points = frontier(setup) if args.frontier else ()
    if args.output == "json":
        document = report.to_json(setup, results, points)
        document["routing"] = report.routing_json(by_routing)
        json.dump(document, sys.stdout, indent=2)
        print()
    else:
        print(
            report.table(setup, results)
            + (report.frontier_table(setup, points) if points else "")
            + (report.routing_table(by_routing) if args.routing != "load" else "")
        )
    if args.plot:
        report.plot(setup, results, args.plot, points)
        print(f"plot written to {args.plot}", file=sys.stderr)
    return 0
