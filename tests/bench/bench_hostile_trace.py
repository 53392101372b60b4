"""Benchmark: the hostile trace (tests/unit/autoscale/test_hostile_trace.py) with and
without spec.engine.capLongPrefills, as the numbers in docs/autoscaler.md.

Reports numbers only: for each engine setting, the long-prefill threshold replayed, fixed
fleets of 1-4 replicas (attainment, GPU-hours, and on the need the other requests' TTFT and
TPOT misses), and ours (settled replicas after 5 minutes, attainment, GPU-hours).

Run: .venv/bin/python tests/bench/bench_hostile_trace.py   (about a minute)
"""

from __future__ import annotations

import sys
from pathlib import Path

from tokenfleet.autoscale.fleetsim import run as fleetsim_run
from tokenfleet.autoscale.fleetsim.policies import Static, Tokenfleet
from tokenfleet.autoscale.fleetsim.replica import FleetRequest
from tokenfleet.autoscale.fleetsim.run import SimOptions, prepare, run_policy
from tokenfleet.capacity import PlanRequest, get_gpu, load_model

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the checkout: tests.support
from tests.support.hostile_trace import LONG_PROMPT, hostile_trace, settled_mean


def _misses(options: SimOptions, replicas: int) -> tuple[float, float]:
    """(TTFT, TPOT) miss shares among the requests that are not long, on a fixed fleet."""
    made: list[FleetRequest] = []
    real = fleetsim_run.FleetRequest

    def record(*args: object, **kwargs: object) -> FleetRequest:
        request = real(*args, **kwargs)  # type: ignore[arg-type]
        made.append(request)
        return request

    setup = prepare(hostile_trace(True), options)
    fleetsim_run.FleetRequest = record  # type: ignore[misc,assignment]
    try:
        run_policy(setup, Static(replicas))
    finally:
        fleetsim_run.FleetRequest = real  # type: ignore[misc]
    short = [r for r in made[-len(setup.trace.requests) :] if r.prompt < LONG_PROMPT]
    ttft = sum(1 for r in short if r.ttft > options.ttft_ms / 1000)
    tpot = sum(1 for r in short if r.ttft <= options.ttft_ms / 1000 and r.tpot > 0.05)
    return ttft / len(short), tpot / len(short)


def main() -> None:
    for cap in (False, True):
        request = PlanRequest(
            arch=load_model("meta-llama/Llama-3.1-8B"),
            gpu=get_gpu("l40s"),
            max_model_len=8192,
            cap_long_prefills=cap,
        )
        options = SimOptions(request=request)
        hostile = prepare(hostile_trace(True), options)
        need = prepare(hostile_trace(False), options).static_replicas
        threshold = hostile.shape.config.long_prefill_token_threshold
        print(f"capLongPrefills={cap}: threshold {threshold}, need {need}")
        for n in range(1, 5):
            fixed = run_policy(hostile, Static(n))
            print(f"  fixed {n}: {fixed.attainment:.1%}, {fixed.gpu_hours:.2f} GPU-h")
        ttft, tpot = _misses(options, need)
        print(f"  others' misses on {need}: TTFT {ttft:.1%}, TPOT {tpot:.1%}")
        ours = run_policy(hostile, Tokenfleet(hostile.spec, hostile.predicted_capacity, need))
        settled = settled_mean(ours)
        print(
            f"  ours: settled {settled:.2f} ({settled / need:.2f}x), "
            f"{ours.attainment:.1%}, {ours.gpu_hours:.2f} GPU-h"
        )


if __name__ == "__main__":
    main()
