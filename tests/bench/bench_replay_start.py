"""Benchmark: how much a replay's result owes to the fleet ours starts from.

autoscale-sim starts every reactive policy from what the trace's first minutes need, with
no memory of the traffic, while a fixed fleet of N is sized knowing the whole trace. On
traffic in bursts shorter than a cold start, ours' standing floor (autoscale/bursts.py) is
sized from the bursts it has seen break or hold on the fleets it happened to run, so the
first minutes shape the rest of the hour. This replays ours from other starting fleets too.

Reports numbers only: for each start, ours' attainment and GPU-hours, and its cost against
the cheapest fixed fleet reaching that attainment (the static frontier); then the misses
before and after ours' floor first stands, ours' (with its average desired replicas after
it) beside each fixed fleet's in the same minutes.

Run: .venv/bin/python tests/bench/bench_replay_start.py TRACE [--gpu l40s] [--ttft-slo-ms 500]
         [--starts 1 2 4 8 12] [--fixed 12 14 16 18]
TRACE: a trace file (e.g. ../shared/reference/traces/azure2023_code.csv, about 40 s), or
onoff:SEED or spiky:SEED for the generated calibration traces
(tests/support/onoff_trace.py).
"""

from __future__ import annotations

import argparse
import itertools
import sys
from pathlib import Path

from tokenfleet.autoscale.fleetsim.frontier import cheapest_reaching, frontier
from tokenfleet.autoscale.fleetsim.policies import Static, Tokenfleet
from tokenfleet.autoscale.fleetsim.run import (
    RunResult,
    SimOptions,
    make_autoscaler,
    prepare,
    run_policy,
)
from tokenfleet.autoscale.fleetsim.traces import Trace, load

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the checkout: tests.support
from tests.support.onoff_trace import onoff_trace, spiky_trace

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


def _split(run: RunResult, at: float) -> tuple[int, int]:
    """The run's misses before and after `at`."""
    before = sum(1 for t in run.missed_at if t < at)
    return before, len(run.missed_at) - before


def _between(misses: dict[int, int], replicas: float) -> float | None:
    """Misses of a fixed fleet of `replicas`, linear between the nearest fixed fleets on
    either side (None outside them)."""
    sizes = sorted(misses)
    for lo, hi in itertools.pairwise(sizes):
        if lo <= replicas <= hi:
            w = (replicas - lo) / (hi - lo)
            return misses[lo] * (1 - w) + misses[hi] * w
    return None


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("trace")
    parser.add_argument("--gpu", default="l40s")
    parser.add_argument("--ttft-slo-ms", type=float, default=500.0)
    parser.add_argument("--starts", type=int, nargs="+", default=[1, 2, 4, 8, 12])
    parser.add_argument("--fixed", type=int, nargs="+", default=[12, 14, 16, 18])
    args = parser.parse_args()
    setup = prepare(trace_of(args.trace), SimOptions.of(gpu=args.gpu, ttft_ms=args.ttft_slo_ms))
    points = frontier(setup)
    statics = {n: run_policy(setup, Static(n)) for n in args.fixed}
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
        split = floor_from(ours)
        if split == float("inf"):
            print("  no standing floor")
            continue
        # Desired replicas (those billed, less the ones draining) averaged after the split.
        after = [p.desired for p in run.timeline if p.at >= split]
        mean = sum(after) / max(len(after), 1)
        cells = [(f"ours ({mean:.1f} replicas on average)", run)]
        cells += [(f"N={n}", static) for n, static in statics.items()]
        misses = ", ".join("{} {} / {}".format(name, *_split(r, split)) for name, r in cells)
        print(f"  floor first stands at {split / 60:.1f} min; misses before / after: {misses}")
        expected = _between({n: _split(r, split)[1] for n, r in statics.items()}, mean)
        if expected is not None:
            excess = _split(run, split)[1] / expected - 1
            print(
                f"  after it ours misses {excess:+.0%} against fixed fleets "
                f"of its average size ({expected:.0f}, interpolated)"
            )


if __name__ == "__main__":
    main()
