"""`tokenfleet demo`: the whole loop on this machine, live in the terminal.

The real operator (a `tokenfleet operator` process) runs against an **emulated Kubernetes
API (kmock)**; a kubelet stand-in starts one `tokenfleet sim` process per replica the
operator asks for; a real Prometheus scrapes them; the example LLMService is applied and a
load step is driven through tokenfleet.bench's client. The terminal shows the plan, then
one line per sample: load, replicas ready/desired, TTFT quantile, SLO attainment, goodput
and the autoscaler's last decision. It ends with a summary and a PNG plot, and stops every
process it started, also on Ctrl-C. See tokenfleet/localfleet/__init__.py for how time is
scaled (simulated seconds everywhere, --time-scale x faster than the wall clock).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from tokenfleet.localfleet.emulated import REPO_ROOT

DEFAULT_EXAMPLE = "examples/llama-3.1-8b-l4-autoscale.yaml"
# Ten times faster than real time: the example's 180 s scale-down window takes 18 s, the
# 120 s cold start 12 s, and the whole demo stays under 5 minutes on a 2-core machine.
DEFAULT_TIME_SCALE = 10.0


def add_arguments(p: argparse.ArgumentParser, name: str) -> None:
    p.add_argument(
        "-f",
        "--filename",
        default=DEFAULT_EXAMPLE,
        help="the LLMService to apply (default: %(default)s, from the repository)",
    )
    p.add_argument(
        "--time-scale",
        type=float,
        default=DEFAULT_TIME_SCALE,
        help="run this many times faster than real time (default: %(default)s)",
    )
    p.add_argument(
        "--cold-start",
        type=float,
        default=120.0,
        metavar="SECONDS",
        help="simulated seconds before a new replica serves (default: %(default)s)",
    )
    p.add_argument(
        "--low",
        type=float,
        default=0.3,
        help="base load, as a multiple of one replica's planned goodput (default: %(default)s)",
    )
    p.add_argument(
        "--high",
        type=float,
        default=2.0,
        help="load step, as a multiple of one replica's planned goodput (default: %(default)s)",
    )
    p.add_argument(
        "--phases",
        default="180,720,900",
        metavar="S,S,S",
        help="simulated seconds of base load, of the step, and of base load again "
        "(default: %(default)s)",
    )
    p.add_argument(
        "--ramp",
        type=float,
        default=240.0,
        metavar="SECONDS",
        help="simulated seconds the load takes to climb from --low to --high; 0 is a step "
        "(default: %(default)s)",
    )
    p.add_argument(
        "--plot", default="demo.png", help="PNG written at the end (default: %(default)s)"
    )
    p.add_argument("--workdir", help="keep logs and Prometheus data here (default: a temp dir)")
    p.add_argument(
        "--sample",
        type=float,
        default=20.0,
        metavar="SECONDS",
        help="simulated seconds between view lines (default: %(default)s)",
    )


def _example_path(value: str) -> Path:
    path = Path(value)
    if not path.exists() and (REPO_ROOT / value).exists():
        path = REPO_ROOT / value
    return path


def run(args: argparse.Namespace) -> int:
    import asyncio

    from tokenfleet.localfleet.demo import DemoOptions, run_demo

    path = _example_path(args.filename)
    if not path.exists():
        print(f"error: -f {args.filename}: no such file", file=sys.stderr)
        return 2
    try:
        phases = tuple(float(x) for x in args.phases.split(","))
        if len(phases) != 3 or min(phases) <= 0:
            raise ValueError
    except ValueError:
        print(
            f"error: --phases {args.phases!r}: give three positive simulated durations, "
            "e.g. 180,720,900",
            file=sys.stderr,
        )
        return 2
    if args.time_scale <= 0:
        print(f"error: --time-scale {args.time_scale}: must be > 0, e.g. 10", file=sys.stderr)
        return 2
    options = DemoOptions(
        example=path,
        time_scale=args.time_scale,
        cold_start_s=args.cold_start,
        low=args.low,
        high=args.high,
        phases=(phases[0], phases[1], phases[2]),
        ramp_s=max(0.0, args.ramp),
        plot=Path(args.plot),
        workdir=Path(args.workdir) if args.workdir else None,
        sample_s=args.sample,
        interactive=sys.stdout.isatty(),
    )
    return asyncio.run(run_demo(options))
