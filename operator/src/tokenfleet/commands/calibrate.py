"""`tokenfleet calibrate`: the capacity model against the engine logs it was fitted to, and
(`--perf`) its latency / throughput predictions against published serving benchmarks."""

from __future__ import annotations

import argparse

from tokenfleet.calibration.memory_points import POINTS
from tokenfleet.calibration.silicon_harness import SGLANG_LAUNCHES
from tokenfleet.capacity.types import GIB
from tokenfleet.errors import UserError


def add_arguments(p: argparse.ArgumentParser, name: str) -> None:
    del name
    p.add_argument(
        "--perf",
        action="store_true",
        help="predicted vs published TTFT / TPOT / throughput (perf-data.csv), held-in and "
        "held-out rows, with the median and p90 |error|",
    )
    p.add_argument(
        "--silicon",
        metavar="FILE.csv",
        help="with --perf: score measured rows in AIConfigurator's silicon_sample.csv format "
        "(median / p90 |error| and bias of TTFT and TPOT per GPU, engine and model; the rows "
        "it cannot plan and why)",
    )
    p.add_argument(
        "--rows", action="store_true", help="with --silicon: also print every row's prediction"
    )
    p.add_argument(
        "--moe-kernels",
        metavar="FILE.csv",
        help="score the step model's MoE expert term against measured H100 fused-MoE kernel "
        "latencies (moe-kernels-h100.csv's columns), per format, split and engine",
    )
    p.add_argument(
        "--fit",
        action="store_true",
        help="with --silicon: fit the client-overhead table on the file's fit split and print "
        "it, then score the fit and held-out splits apart (for the H100 calibration file only); "
        "with --moe-kernels: fit the bf16 / fp8 MoE kernel constants on the fit split",
    )
    p.add_argument(
        "--sglang-launch",
        choices=SGLANG_LAUNCHES,
        default="auto",
        help="with --silicon: how the SGLang rows were launched: 'generator' with "
        "AIConfigurator's --enable-mixed-chunk and --max-prefill-tokens ISL+1500, 'defaults' "
        "with SGLang's own defaults, 'auto' (default) by version as AIConfigurator's "
        "generator does (the flags from 0.5.6.post2 on)",
    )
    p.add_argument(
        "--dataset-entries",
        type=int,
        default=0,
        metavar="N",
        help="with --silicon: the benchmark drew each prompt at random from N distinct ones "
        "(aiperf's default is 100), so repeated prompts hit the prefix cache; 0 (default): "
        "every prompt distinct",
    )


def run(args: argparse.Namespace) -> int:
    moe = getattr(args, "moe_kernels", None)
    if moe:
        from tokenfleet.commands.calibrate_moe import print_moe

        return print_moe(moe, getattr(args, "fit", False))
    silicon = getattr(args, "silicon", None)
    if silicon and not getattr(args, "perf", False):
        raise UserError("silicon", silicon, "scores latency", "add --perf")
    if silicon:
        from tokenfleet.calibration.silicon_harness import Harness
        from tokenfleet.commands.calibrate_silicon import print_silicon

        entries = getattr(args, "dataset_entries", 0)
        if entries < 0:
            raise UserError(
                "dataset-entries", entries, "must be 0 or more", "pass 0 for distinct prompts"
            )
        harness = Harness(getattr(args, "sglang_launch", "auto"), entries)
        rows, fit = getattr(args, "rows", False), getattr(args, "fit", False)
        return print_silicon(silicon, rows, fit, harness)
    if getattr(args, "perf", False):
        from tokenfleet.commands.calibrate_perf import print_perf

        print_perf()
        return 0
    print(f"{'engine':<15}{'model':<30}{'gpu':<11}{'TP':>3}{'printed':>11}{'predicted':>11}"
          f"{'error':>8}{'KV GiB printed/predicted':>27}{'conc. printed/pred.':>21}")  # fmt: skip
    for pt in POINTS:
        p = pt.predict()
        err = (p.kv_cache_tokens / pt.printed_tokens - 1) * 100
        kv = f"{pt.printed_kv_gib or '-'} / {p.memory.kv_cache / GIB:.2f}"
        conc = f"{pt.printed_concurrency or '-'} / {p.max_concurrency:.2f}"
        engine = f"{pt.engine} {pt.version}"
        print(f"{engine:<15}{pt.model:<30}{pt.gpu:<11}{pt.tp:>3}{pt.printed_tokens:>11,}"
              f"{p.kv_cache_tokens:>11,}{err:>+7.2f}%{kv:>27}{conc:>21}")  # fmt: skip
    return 0
