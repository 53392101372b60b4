"""`tokenfleet plan --speculative M --breakdown speculative`: the speed-up by batch size."""

from __future__ import annotations

import json
import sys

from tokenfleet.capacity.speculative_curve import speedup_curve
from tokenfleet.capacity.types import PlanRequest
from tokenfleet.errors import UserError


def print_speedup(req: PlanRequest, output: str) -> None:
    sp = req.speculative
    if sp is None:
        raise UserError(
            "breakdown", "speculative", "needs a proposer to compare",
            "add --speculative METHOD (and --num-speculative-tokens, --acceptance-rate)",
        )  # fmt: skip
    curve = speedup_curve(req)
    if output != "table":
        doc = {
            "tensorParallelSize": curve.tensor_parallel_size,
            "pipelineParallelSize": curve.pipeline_parallel_size,
            "method": sp.method,
            "numSpeculativeTokens": sp.num_speculative_tokens,
            "acceptanceRate": round(sp.rate, 4),
            "tokensPerStep": round(curve.tokens_per_step, 3),
            "crossoverBatch": curve.crossover_batch,
            "rows": [
                {
                    "batch": r.batch,
                    "seedSpeedup": round(r.seed, 3),
                    "leviathanSpeedup": round(r.leviathan, 3),
                    "stepSpeedup": round(r.step_speedup, 3),
                    "tpotWithoutMs": round(r.tpot_without_ms, 2),
                    "tpotWithMs": round(r.tpot_with_ms, 2),
                    "loadSpeedup": round(r.load_speedup, 3),
                    "heldWithout": r.held_without,
                    "heldWith": r.held_with,
                }
                for r in curve.rows
            ],
        }
        if output == "json":
            json.dump(doc, sys.stdout, indent=2)
            print()
        else:
            import yaml

            yaml.safe_dump(doc, sys.stdout, sort_keys=False)
        return
    cross = (
        f"from batch {curve.crossover_batch}"
        if curve.crossover_batch is not None
        else f"at no batch up to {curve.rows[-1].batch}"
    )
    print(
        f"{req.arch.name} on {req.gpu.id}, TP {curve.tensor_parallel_size} x PP "
        f"{curve.pipeline_parallel_size}, {req.engine}: {sp.method} K={sp.num_speculative_tokens}"
        f", acceptance {sp.rate:.2f} ({sp.rate_source})"
    )
    print(
        f"  {req.input_tokens} in / {req.output_tokens} out (decode context {curve.context}); "
        f"seed = (1 - a^(K+1)) / (1 - a) = {curve.tokens_per_step:.2f}; Leviathan = seed / "
        "(1 + K c), c = draft step / target step"
    )
    print(
        f"  {'batch':>5} {'seed':>6} {'Leviathan':>9} {'step model':>10}   "
        f"{'TPOT without':>12} {'TPOT with':>9} {'speed-up':>8}   {'held w/o':>8} {'held with':>9}"
    )
    for r in curve.rows:
        print(
            f"  {r.batch:>5} {r.seed:>6.2f} {r.leviathan:>9.2f} {r.step_speedup:>10.2f}   "
            f"{r.tpot_without_ms:>9.1f} ms {r.tpot_with_ms:>6.1f} ms {r.load_speedup:>8.2f}   "
            f"{r.held_without:>8} {r.held_with:>9}"
        )
    print(f"  a speculative token costs more than a plain decode token {cross} (step model)")
