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
import math
import sys
from dataclasses import dataclass
from pathlib import Path

from tokenfleet.commands.paths import check_output_file

# Ships as package data (tokenfleet/localfleet/examples/), so an installed wheel has it.
DEFAULT_EXAMPLE = "llama-3.1-8b-l4-autoscale.yaml"
# Ten times faster than real time: the example's 180 s scale-down window takes 18 s, the
# 120 s cold start 12 s, and the whole demo stays under 5 minutes on a 2-core machine.
DEFAULT_TIME_SCALE = 10.0


@dataclass(frozen=True)
class Scenario:
    """A load shape, in multiples of one replica's planned goodput and simulated seconds:
    `low` for phases[0], a ramp to `high` over `ramp`, `high` until phases[0] + phases[1],
    then `low` again for phases[2]."""

    low: float
    high: float
    phases: str
    ramp: float
    about: str


SCENARIOS = {
    # A ramp slower than a cold start: the load needs a new replica every ~8 minutes, so an
    # autoscaler that keeps its headroom has each one ready in time. At one replica's worth
    # of load (under 1 req/s) a faster ramp's rise is within the counting noise for the
    # first minutes and must be forecast on thin evidence (docs/demo.md).
    "ramp": Scenario(0.3, 2.0, "180,1320,600", 900.0, "0.3x -> 2x over 15 minutes"),
    # A step within a second: no replica ordered after it serves for a cold start, so the
    # SLO breaks until they do. What reacting cannot do, shown honestly.
    "spike": Scenario(0.3, 2.0, "180,720,900", 0.0, "0.3x -> 2x in a second"),
    # Five simulated minutes to check an install: one scale-up, within the SLO.
    "check": Scenario(0.3, 1.0, "60,240,60", 120.0, "0.3x -> 1x over 2 minutes"),
}


def add_arguments(p: argparse.ArgumentParser, name: str) -> None:
    p.add_argument(
        "-f",
        "--filename",
        help=f"the LLMService to apply (default: the packaged {DEFAULT_EXAMPLE}, as in the "
        "repository's examples/)",
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
        "--scenario",
        choices=sorted(SCENARIOS),
        default="ramp",
        help="the load's shape: "
        + "; ".join(f"{k}: {v.about}" for k, v in SCENARIOS.items())
        + " (default: %(default)s); the four options below change any part of it",
    )
    p.add_argument(
        "--low",
        type=float,
        default=None,
        help="base load, as a multiple of one replica's planned goodput (ramp: 0.3)",
    )
    p.add_argument(
        "--high",
        type=float,
        default=None,
        help="peak load, as a multiple of one replica's planned goodput (ramp: 2)",
    )
    p.add_argument(
        "--phases",
        default=None,
        metavar="S,S,S",
        help="simulated seconds of base load, of the rise and peak, and of base load again "
        "(ramp: 180,1320,600)",
    )
    p.add_argument(
        "--ramp",
        type=float,
        default=None,
        metavar="SECONDS",
        help="simulated seconds the load takes to climb from --low to --high; 0 is a step "
        "(ramp: 900)",
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


def packaged_example() -> Path:
    from importlib.resources import files

    return Path(str(files("tokenfleet.localfleet").joinpath("examples", DEFAULT_EXAMPLE)))


def _check_llmservice(path: Path, shown: str) -> str | None:
    """None when the file holds an LLMService, else the one-line problem (before anything
    starts: no temp dir, no process)."""
    import yaml

    from tokenfleet.localfleet.demo import load_llmservice

    fix = "pass a YAML file holding an LLMService, e.g. the repository's examples/"
    try:
        load_llmservice(path)
    except FileNotFoundError:
        return f"-f {shown}: no such file"
    except IsADirectoryError:
        return f"-f {shown}: is a directory; {fix}"
    except UnicodeDecodeError:
        return f"-f {shown}: not UTF-8 text (a binary file?); {fix}"
    except OSError as error:
        return f"-f {shown}: {error.strerror or 'cannot read'}; {fix}"
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        return f"-f {shown}: not valid YAML{where}; fix the YAML syntax"
    except (ValueError, AttributeError, TypeError):
        return f"-f {shown}: no LLMService in the file; {fix}"
    return None


def run(args: argparse.Namespace) -> int:
    import asyncio

    from tokenfleet.localfleet.demo import DemoOptions, run_demo

    scenario = SCENARIOS[args.scenario]
    for flag, value in (
        ("low", scenario.low),
        ("high", scenario.high),
        ("phases", scenario.phases),
        ("ramp", scenario.ramp),
    ):
        if getattr(args, flag) is None:
            setattr(args, flag, value)
    path = Path(args.filename) if args.filename else packaged_example()
    check_output_file("--plot", args.plot, ".png")
    problem = _check_llmservice(path, args.filename or str(path))
    if problem is not None:
        print(f"error: {problem}", file=sys.stderr)
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
    problem = _check_numbers(args)
    if problem is not None:
        print(f"error: {problem}", file=sys.stderr)
        return 2
    problem = _check_prometheus()
    if problem is not None:
        print(f"error: {problem}", file=sys.stderr)
        return 2
    options = DemoOptions(
        example=path,
        time_scale=args.time_scale,
        cold_start_s=args.cold_start,
        low=args.low,
        high=args.high,
        phases=(phases[0], phases[1], phases[2]),
        ramp_s=args.ramp,
        plot=Path(args.plot),
        workdir=Path(args.workdir) if args.workdir else None,
        sample_s=args.sample,
    )
    return asyncio.run(run_demo(options))


def _check_numbers(args: argparse.Namespace) -> str | None:
    """The first numeric option out of range, as one line naming flag, value and fix."""
    checks = (
        ("--time-scale", args.time_scale, False, "e.g. 10"),
        ("--sample", args.sample, False, "e.g. 20"),
        ("--high", args.high, False, "e.g. 2 (twice one replica's planned goodput)"),
        ("--low", args.low, True, "e.g. 0.3"),
        ("--cold-start", args.cold_start, True, "e.g. 120"),
        ("--ramp", args.ramp, True, "e.g. 240, or 0 for a step"),
    )
    for flag, value, zero_ok, fix in checks:
        if not math.isfinite(value) or value < 0 or (value == 0 and not zero_ok):
            bound = ">= 0" if zero_ok else "> 0"
            return f"{flag} {value:g}: must be {bound}, {fix}"
    return None


def _check_prometheus() -> str | None:
    from tokenfleet.localfleet.prometheus import prometheus_binary

    try:
        prometheus_binary()
    except RuntimeError as error:
        return str(error)
    return None
