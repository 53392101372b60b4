"""Benchmark: the generated on-off traces (tests/support/onoff_trace.py, the character
of Azure's 2023 "code" trace; and bursts that shrink half-way), seeds 0-2, as the
calibration numbers in docs/autoscaler.md.

Reports numbers only: for each setup (Llama-3.1-8B on L40S at TTFT 500 ms, and on H100 at
TTFT 1 s) and seed, ours (attainment, GPU-hours), the cheapest fixed fleet meeting the SLO
and the cheapest fixed fleet reaching ours' attainment.

Run: .venv/bin/python tests/bench/bench_onoff_trace.py   (about four minutes)
"""

from __future__ import annotations

import itertools
import sys
from pathlib import Path

from tokenfleet.autoscale.fleetsim.policies import Static
from tokenfleet.autoscale.fleetsim.run import (
    RunResult,
    Setup,
    SimOptions,
    make_autoscaler,
    prepare,
    run_policy,
)

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the checkout: tests.support
from tests.support.onoff_trace import onoff_trace, shrinking_trace

TRACES = {"onoff": onoff_trace, "shrinking": shrinking_trace}
SETUPS = {
    "l40s, TTFT 500 ms": SimOptions(),
    "h100-sxm, TTFT 1 s": SimOptions.of(gpu="h100-sxm", ttft_ms=1000.0),
}


def _fixed(setup: Setup, attainment: float) -> tuple[int, RunResult] | None:
    """The fewest replicas whose fixed fleet reaches `attainment` (None: none up to max)."""
    for n in range(1, setup.max_replicas + 1):
        run = run_policy(setup, Static(n))
        if run.attainment >= attainment:
            return n, run
    return None


def _cell(label: str, found: tuple[int, RunResult] | None, ours: RunResult) -> str:
    if found is None:
        return f"{label}: none"
    n, run = found
    ratio = ours.gpu_hours / run.gpu_hours
    return f"{label}: N={n} {run.attainment:.2%} / {run.gpu_hours:.2f} (ours {ratio:.2f}x)"


def main() -> None:
    for (name, options), (kind, make) in itertools.product(SETUPS.items(), TRACES.items()):
        for seed in (0, 1, 2):
            setup = prepare(make(seed), options)
            ours = run_policy(setup, make_autoscaler("tokenfleet", setup))
            line = f"{kind}, {name}, seed {seed}: ours {ours.attainment:.2%}"
            line += f" / {ours.gpu_hours:.2f} GPU-h"
            meeting = _fixed(setup, setup.target) if setup.attainable >= 0.999 else None
            at_ours = _fixed(setup, ours.attainment)
            cells = f"{_cell('meeting the SLO', meeting, ours)}; {_cell('at ours', at_ours, ours)}"
            print(f"{line}; {cells}")


if __name__ == "__main__":
    main()
