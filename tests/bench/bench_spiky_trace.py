"""Benchmark: the generated spiky trace (tests/support/onoff_trace.py: on-off bursts
one replica serves, a third of them with a 10-second spike that breaks TPOT on one replica),
seeds 0-2, Llama-3.1-8B on H100 at TTFT 1 s (one TP 4 replica by default), as the
calibration numbers in docs/autoscaler.md.

Reports numbers only: ours, the oracle and the fixed fleets of 1 and 2 replicas
(attainment / GPU-hours).

Run: .venv/bin/python tests/bench/bench_spiky_trace.py   (about a minute)
"""

from __future__ import annotations

import sys
from pathlib import Path

from tokenfleet.autoscale.fleetsim.policies import Static
from tokenfleet.autoscale.fleetsim.run import SimOptions, make_autoscaler, prepare, run_policy

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the checkout: tests.support
from tests.support.onoff_trace import spiky_trace


def main() -> None:
    for seed in (0, 1, 2):
        setup = prepare(spiky_trace(seed), SimOptions.of(gpu="h100-sxm", ttft_ms=1000.0))
        runs = {
            "ours": run_policy(setup, make_autoscaler("tokenfleet", setup)),
            "oracle": run_policy(setup, make_autoscaler("oracle", setup)),
            "N=1": run_policy(setup, Static(1)),
            "N=2": run_policy(setup, Static(2)),
        }
        cells = ", ".join(f"{k} {r.attainment:.2%} / {r.gpu_hours:.2f}" for k, r in runs.items())
        ratio = runs["ours"].gpu_hours / runs["N=2"].gpu_hours
        print(f"spiky, h100-sxm, TTFT 1 s, seed {seed}: {cells} (ours {ratio:.2f}x N=2)")


if __name__ == "__main__":
    main()
