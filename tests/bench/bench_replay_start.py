"""Benchmark: how much a replay's result owes to the fleet ours starts from.

autoscale-sim starts every reactive policy from what the trace's first minutes need, with
no memory of the traffic, while a fixed fleet of N is sized knowing the whole trace. On
traffic in bursts shorter than a cold start, ours' standing floor (autoscale/bursts.py) is
sized from the bursts it has seen break or hold on the fleets it happened to run, so the
first minutes shape the rest of the hour. This replays ours from other starting fleets too.

Reports numbers only: for each start, ours' attainment and GPU-hours, and its cost against
the cheapest fixed fleet reaching that attainment (the static frontier); and, for the
default start, ours' misses before and after its floor first stands, beside each fixed
fleet's in the same minutes.

Run: .venv/bin/python tests/bench/bench_replay_start.py TRACE [--gpu l40s] [--ttft-slo-ms 500]
         [--starts 1 2 4 8 12] [--fixed 12 14 16 18]
TRACE: a trace file (e.g. ../shared/reference/traces/azure2023_code.csv, about 40 s), or
onoff:SEED or spiky:SEED for the generated calibration traces
(tests/unit/autoscale/onoff_trace.py).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from tokenfleet.autoscale.fleetsim.frontier import cheapest_reaching, frontier
from tokenfleet.autoscale.fleetsim.policies import Static, Tokenfleet
from tokenfleet.autoscale.fleetsim.run import SimOptions, make_autoscaler, prepare, run_policy
from tokenfleet.autoscale.fleetsim.traces import Trace, load

sys.path.insert(0, str(Path(__file__).parents[1] / "unit" / "autoscale"))
from onoff_trace import onoff_trace, spiky_trace

GENERATED = {"onoff": onoff_trace, "spiky": spiky_trace}


def trace_of(name: str) -> Trace:
    kind, _, seed = name.partition(":")
    if kind in GENERATED and seed.isdigit():
        return GENERATED[kind](int(seed))
    return load(name)


def floor_from(ours: Tokenfleet) -> float:
    """When ours' standing floor first stood (never: infinity)."""
    for decision in ours.decisions:
        at = decision.history.bursts.last_at  # set at every decision
        if "burstFloor" in decision.details and at is not None:
            return at
    return float("inf")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("trace")
    parser.add_argument("--gpu", default="l40s")
    parser.add_argument("--ttft-slo-ms", type=float, default=500.0)
    parser.add_argument("--starts", type=int, nargs="+", default=[1, 2, 4, 8, 12])
    parser.add_argument("--fixed", type=int, nargs="+", default=[12, 14, 16, 18])
    args = parser.parse_args()
    setup = prepare(trace_of(args.trace), SimOptions(gpu=args.gpu, ttft_ms=args.ttft_slo_ms))
    points = frontier(setup)
    print(f"{args.trace}, {args.gpu}, TTFT {args.ttft_slo_ms:g} ms: {setup.trace.name}")
    default = make_autoscaler("tokenfleet", setup)
    assert isinstance(default, Tokenfleet)
    for i, start in enumerate([default.start, *args.starts]):
        ours = make_autoscaler("tokenfleet", setup)
        assert isinstance(ours, Tokenfleet)
        ours.start = start
        run = run_policy(setup, ours)
        fixed = cheapest_reaching(points, run.attainment)
        against = (
            f"{run.gpu_hours / fixed.gpu_hours:.2f}x the fixed N={fixed.replicas} "
            f"({fixed.attainment:.2%} / {fixed.gpu_hours:.2f})"
            if fixed is not None
            else "no fixed fleet reaches it"
        )
        label = "start" if i else "default start"
        print(f"ours, {label} {start}: {run.attainment:.2%} / {run.gpu_hours:.2f} GPU-h, {against}")
        if i == 0:
            split = floor_from(ours)
            early = sum(1 for at in run.missed_at if at < split)
            print(
                f"  floor first stands at {split / 60:.1f} min; ours' misses before it "
                f"{early}, after {len(run.missed_at) - early}"
            )
            for n in args.fixed:
                static = run_policy(setup, Static(n))
                before = sum(1 for at in static.missed_at if at < split)
                print(
                    f"  N={n}: {static.attainment:.2%} / {static.gpu_hours:.2f} GPU-h, misses "
                    f"before {before}, after {len(static.missed_at) - before}"
                )


if __name__ == "__main__":
    main()
