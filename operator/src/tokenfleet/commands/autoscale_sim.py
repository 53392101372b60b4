"""`tokenfleet autoscale-sim`: replay a request trace against a modelled fleet under our
autoscaler (the operator's own policy.decide), KEDA- and HPA-style rules, a static peak
provision and the oracle. Offline and deterministic: the same options give the same JSON."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from tokenfleet.capacity.pinned import pin_layout
from tokenfleet.capacity.types import DEFAULT_TPOT_SLO_MS, DEFAULT_TTFT_SLO_MS
from tokenfleet.commands.paths import check_output_file
from tokenfleet.errors import UserError

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
        help="tokenfleet | keda | kserve | hpa | static | reactive | hold | oracle | all, or a "
        "comma list (keda: llm-d's KEDA + EPP guide; kserve: KServe's KEDA example; hpa: an "
        "HPA on vLLM's queue)",
    )
    p.add_argument(
        "--peer-thresholds",
        choices=("best", "documented"),
        default="best",
        help="best: each peer at the best threshold of a small sweep on this trace (the "
        "fewest GPU-hours reaching the attainment ours aims at); documented: at the value "
        "its guide ships (default: %(default)s)",
    )
    # The flags that say what an LLMService says default to None: a flag not given leaves
    # the replayed resource's value (-f) or the default LLMService's (fleetsim.run).
    p.add_argument("--model", help="catalog id (default: meta-llama/Llama-3.1-8B)")
    p.add_argument(
        "--gpu",
        help="GPU type (tokenfleet gpus; default: l40s), or several (l40s,h100-sxm; each may "
        "carry its price, h100-sxm=2.49) to replay the trace on each at its own best layout",
    )
    p.add_argument("--engine", choices=("vllm", "sglang"), help="default: vllm")
    p.add_argument("--max-model-len", type=int, help="default: 8192")
    p.add_argument("--ttft-slo-ms", type=float, help=f"default: {DEFAULT_TTFT_SLO_MS:g}")
    p.add_argument("--tpot-slo-ms", type=float, help=f"default: {DEFAULT_TPOT_SLO_MS:g}")
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
        help="default 1; 0: routed through the endpoint picker, which holds requests at zero "
        "replicas",
    )
    p.add_argument(
        "--scale-to-zero-after",
        type=int,
        help="with --min-replicas 0: idle seconds before the last replica goes (default 600)",
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
    p.add_argument(
        "--serving",
        choices=("aggregated", "disaggregated", "compare"),
        default="aggregated",
        help="aggregated (default): one engine per replica; disaggregated: ours on a prefill "
        "fleet and a decode fleet joined by the KV transfer (the planner's roles, each pool "
        "scaled as the operator scales it); compare: both, side by side",
    )
    p.add_argument(
        "--kv-network-gbps",
        type=float,
        help="disaggregated: the node network in Gb/s per GPU (default: the GPU catalog's)",
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
            raise UserError(
                "--policy", name, "is not a policy", f"use one of {', '.join(POLICIES)} or all"
            )
    return names


# The flags that set a field of the replayed LLMService (fleetsim.run.with_flags' names).
SPEC_FLAGS = {
    "model": "model",
    "gpu": "gpu",
    "engine": "engine",
    "max_model_len": "max_model_len",
    "ttft_slo_ms": "ttft_ms",
    "tpot_slo_ms": "tpot_ms",
    "min_replicas": "min_replicas",
    "max_replicas": "max_replicas",
    "scale_to_zero_after": "scale_to_zero_after",
    "target_utilization": "target_utilization",
}
# With -f these are the resource's: its plan is the layout replayed.
RESOURCE_ONLY = ("model", "gpu", "engine", "max_model_len")


def _replayed(args: argparse.Namespace) -> tuple[Any, Any]:
    """(PlanRequest, LLMServiceSpec) replayed: the resource's (-f) or the default LLMService,
    each updated with the flags given; the layout from -f or from the layout flags through
    the plan command's own request_from_args (its checks included)."""
    from tokenfleet.autoscale.fleetsim.run import default_spec, with_flags

    flags = {SPEC_FLAGS[k]: v for k, v in vars(args).items() if k in SPEC_FLAGS and v is not None}
    if args.filename:
        for name in RESOURCE_ONLY:
            if name in flags:
                flag = "--" + name.replace("_", "-")
                raise UserError(
                    flag, flags[name], "is the LLMService's with -f", f"drop {flag} or -f"
                )
        request, spec = _from_service(args.filename)
        return request, with_flags(spec, **flags)
    if "gpu" in flags:  # --gpu a,b: the spec names the first; the request all (plan --gpu)
        flags["gpu"] = str(flags["gpu"]).split(",")[0].partition("=")[0].strip()
    spec = with_flags(default_spec(), **flags)
    from tokenfleet.commands.plan import request_from_args

    defaults = vars(_plan_parser().parse_args(["--model", spec.model.id, "--gpu", spec.gpu.type]))
    given = {k: v for k, v in vars(args).items() if k in defaults and v is not None}
    merged = {**defaults, **given, "engine": spec.engine.kind}
    return request_from_args(argparse.Namespace(**merged)), spec


def _from_service(path: str) -> tuple[Any, Any]:
    from tokenfleet.commands.render import load_documents, render_documents

    try:
        documents = load_documents(path)
    except UnicodeDecodeError:
        problem = "is not UTF-8 text"
        raise UserError("--filename", path, problem, "give an LLMService YAML") from None
    rendered = render_documents(documents, path)
    if not rendered:
        raise UserError("--filename", path, "has no LLMService", "give an LLMService YAML")
    spec, p = rendered[0].service.spec, rendered[0].plan
    if p.request is None:  # plan_service always keeps its request; a bug otherwise
        raise RuntimeError(f"{path}: the plan lost its request")
    # The context replayed is the one its plan serves (the spec may leave it to the plan).
    workload = spec.workload.model_copy(update={"max_model_len": p.max_model_len})
    # spec.gpu.type auto: the replay runs the type the planner chose.
    gpu = spec.gpu.model_copy(update={"type": p.gpu.id, "candidates": []})
    return pin_layout(p.request, p), spec.model_copy(update={"workload": workload, "gpu": gpu})


def options(args: argparse.Namespace) -> Any:
    """The replay's SimOptions: the LLMService replayed (the resource's with -f, else the
    default one), each spec flag given replacing its field, and the replay's own flags."""
    from pydantic import ValidationError

    from tokenfleet.api.parse import spec_error
    from tokenfleet.api.spec import LLMServiceSpec
    from tokenfleet.autoscale.fleetsim.run import SimOptions

    for flag in ("max_replicas", "max_model_len"):
        value = getattr(args, flag)
        if value is not None and value < 1:
            raise UserError(
                "--" + flag.replace("_", "-"), value, "must be at least 1", "pass 1 or more"
            )
    request, spec = _replayed(args)
    auto = spec.autoscaling
    if args.max_replicas is not None and auto.max_replicas < auto.min_replicas:
        raise UserError("--max-replicas", args.max_replicas, "is below --min-replicas", "raise it")
    # The flags went in by model_copy, which does not validate: check the result once
    # against the API's bounds (minReplicas >= 0, targetUtilization in (0, 1], ...).
    try:
        LLMServiceSpec.model_validate(
            spec.model_dump(by_alias=True, exclude_none=True)
            | {"routing": {"enabled": True}}  # the replay puts the picker in front at zero
        )
    except ValidationError as error:
        raise spec_error(error) from None
    return SimOptions(
        spec,
        cold_start=args.cold_start,
        capacity_error=args.capacity_error,
        # The flags' default is twice the static peak; a resource's maxReplicas is its own.
        peak_max_replicas=args.max_replicas is None and not args.filename,
        seed=args.seed,
        strict=args.strict,
        routing="affinity" if args.routing == "compare" else args.routing,
        request=request,
        peer_thresholds=args.peer_thresholds,
    )


def run(args: argparse.Namespace) -> int:
    from tokenfleet.autoscale.fleetsim import report
    from tokenfleet.autoscale.fleetsim.frontier import frontier
    from tokenfleet.autoscale.fleetsim.run import run as simulate
    from tokenfleet.autoscale.fleetsim.run import run_routings
    from tokenfleet.autoscale.fleetsim.traces import load

    if args.min_replicas is not None and args.min_replicas < 0:
        raise UserError("--min-replicas", args.min_replicas, "must be 0 or more", "pass 0 or 1")
    if args.target_utilization is not None and not 0 < args.target_utilization <= 1:
        raise UserError(
            "--target-utilization", args.target_utilization, "must be in (0, 1]", "pass e.g. 0.8"
        )
    if args.plot:
        check_output_file("--plot", args.plot, ".png")
    replay = options(args)
    several = replay.request is not None and replay.request.gpu_candidates
    if several and (args.plot or args.routing == "compare"):
        raise UserError(
            "--gpu",
            args.gpu,
            "names several types, and --plot / --routing compare show one",
            "run those with one --gpu type",
        )
    trace = load(args.trace, args.seed, args.strict)
    serving = getattr(args, "serving", "aggregated")
    policies = _policies(args.policy) if serving == "aggregated" else ("tokenfleet",)
    if serving == "disaggregated":
        policies = ()
    if several:  # --gpu a,b,c: the same replay on each type
        if serving != "aggregated":
            raise UserError(
                "--serving", serving, "compares one GPU type's fleets",
                "pass one --gpu with --serving, or drop --serving",
            )  # fmt: skip
        from tokenfleet.commands import autoscale_sim_gpus as by_gpu

        runs = by_gpu.run_types(trace, replay, policies, args.frontier)
        if args.output == "json":
            json.dump(by_gpu.to_json(runs), sys.stdout, indent=2)
            print()
        else:
            print(by_gpu.table(runs))
        return 0
    setup, results = simulate(trace, replay, policies)
    pd_line = ""
    if serving != "aggregated":
        from tokenfleet.autoscale.fleetsim.disagg import (
            PD_NAME,
            describe,
            prepare_disaggregated,
            run_disaggregated,
        )

        pd = prepare_disaggregated(setup, getattr(args, "kv_network_gbps", None))
        results[PD_NAME] = run_disaggregated(setup, pd)
        pd_line = "\n" + describe(pd)
    by_routing = {replay.routing: results}
    if args.routing == "compare":
        chosen = {name: r.thresholds for name, r in results.items() if r.thresholds}
        by_routing.update(run_routings(setup, policies, ("round-robin",), chosen))
    points = frontier(setup) if args.frontier else ()
    if args.output == "json":
        document = report.to_json(setup, results, points)
        document["routing"] = report.routing_json(by_routing)
        if pd_line:
            document["disaggregated"] = pd_line.strip()
        json.dump(document, sys.stdout, indent=2)
        print()
    else:
        print(
            report.table(setup, results)
            + pd_line
            + (report.frontier_table(setup, points) if points else "")
            + (report.routing_table(by_routing) if args.routing != "load" else "")
        )
    if args.plot:
        report.plot(setup, results, args.plot, points)
        print(f"plot written to {args.plot}", file=sys.stderr)
    return 0
