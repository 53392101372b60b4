"""`tokenfleet bench --gpu ...`: the plan's prediction of this very benchmark, beside what it
measured, so a user checks the capacity model on their own cluster in one command.

The served model is planned on the GPU named (the catalog id: --model, or --plan-model
when the server's name is not one), with the engine and layout given, and the benchmark's
procedure (capacity/benchmark.py: --max-concurrency -> closed loop, --request-rate inf ->
burst, a finite rate -> Poisson) predicted at its prompt and output lengths.
"""

from __future__ import annotations

import argparse
import math

from tokenfleet.bench.aggregate import BenchmarkMetrics
from tokenfleet.capacity.benchmark import BenchmarkRun
from tokenfleet.capacity.load import Procedure
from tokenfleet.errors import UserError


def add_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group(
        "prediction",
        "with --gpu, the plan's prediction for this benchmark is printed beside the measurement",
    )
    group.add_argument(
        "--gpu", default=None, help="catalog GPU the server runs on (tokenfleet gpus)"
    )
    group.add_argument(
        "--plan-model",
        default=None,
        help="catalog id or config.json of the served model (default: --model)",
    )
    group.add_argument("--engine", choices=("vllm", "sglang"), default="vllm")
    group.add_argument("--engine-version", default=None, help="default: the planner's")
    group.add_argument("--tp", type=int, default=None, help="the server's tensor-parallel size")


def procedure_of(request_rate: float, burstiness: float, max_concurrency: int | None) -> Procedure:
    if burstiness != 1.0:
        raise UserError(
            "burstiness", burstiness, "the prediction models Poisson arrivals only",
            "drop --burstiness, or --gpu for a run without prediction",
        )  # fmt: skip
    if max_concurrency is not None and math.isinf(request_rate):
        return "closed-loop"
    if max_concurrency is not None:
        raise UserError(
            "max-concurrency", max_concurrency,
            "with a finite --request-rate is not a procedure the plan predicts",
            "use --max-concurrency with --request-rate inf, or a rate without it",
        )  # fmt: skip
    return "burst" if math.isinf(request_rate) else "poisson"


def predict(
    args: argparse.Namespace,
    model: str,
    input_len: int,
    output_len: int,
    num_prompts: int | None,
) -> BenchmarkRun | None:
    """The plan's prediction of the benchmark `args` describe (None without --gpu)."""
    if args.gpu is None:
        return None
    from tokenfleet.capacity import PlanRequest, get_gpu, load_model, plan
    from tokenfleet.capacity.benchmark import predict_for_plan

    if num_prompts is None:
        raise UserError(
            "duration", args.duration, "a run bounded by time has no prompt count to predict",
            "pass --num-prompts N with --gpu",
        )  # fmt: skip
    if args.random_range_ratio:
        raise UserError(
            "random-range-ratio", args.random_range_ratio,
            "the prediction runs fixed-length requests", "drop it, or --gpu",
        )  # fmt: skip
    procedure = procedure_of(args.request_rate, args.burstiness, args.max_concurrency)
    arch = load_model(args.plan_model or model)
    concurrency = args.max_concurrency or 1
    p = plan(
        PlanRequest(
            arch=arch,
            gpu=get_gpu(args.gpu),
            engine=args.engine,
            engine_version=args.engine_version,
            tensor_parallel_size=args.tp,
            concurrency=concurrency,
            input_tokens=input_len,
            output_tokens=output_len,
        )
    )
    rate = None if math.isinf(args.request_rate) else args.request_rate
    return predict_for_plan(p, procedure, num_prompts, concurrency, rate, input_len, output_len)


def side_by_side(run: BenchmarkRun, measured: BenchmarkMetrics) -> str:
    """Predicted beside measured, with the error of each."""
    d = measured.distributions

    def row(label: str, predicted: float | None, got: float | None, unit: str) -> str:
        if predicted is None or got is None:
            return ""
        error = f"{predicted / got - 1:+.0%}" if got > 0 else "-"
        return f"{label:<28}{predicted:>12.2f}{got:>12.2f}{error:>8}  {unit}\n"

    def ms(value: float | None) -> float | None:
        return None if value is None else value * 1e3

    ttft, tpot = d.get("ttft"), d.get("tpot")
    text = (
        f"{' Plan vs measured ':=^60}\n"
        f"procedure: vllm bench serve {run.command}\n"
        f"{'':<28}{'predicted':>12}{'measured':>12}{'error':>8}\n"
    )
    text += row("Mean TTFT", ms(run.ttft_mean_s), ttft.mean if ttft else None, "ms")
    text += row("Median TTFT", ms(run.ttft_p50_s), ttft.median if ttft else None, "ms")
    text += row("Mean TPOT", ms(run.tpot_mean_s), tpot.mean if tpot else None, "ms")
    text += row("Median TPOT", ms(run.tpot_p50_s), tpot.median if tpot else None, "ms")
    text += row("Output throughput", run.output_tokens_per_second,
                measured.output_throughput, "tok/s")  # fmt: skip
    return text + "=" * 60
