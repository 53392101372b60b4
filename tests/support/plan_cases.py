"""plan() over a fixed table of catalog cases, to check that a speed-up changes no
prediction: dump one tree's plans, then another's, and compare.

    python tests/support/plan_cases.py run > new.jsonl
    PYTHONPATH=<other tree>/operator/src python tests/support/plan_cases.py run > old.jsonl
    python tests/support/plan_cases.py compare old.jsonl new.jsonl

`run` prints one JSON line per case (chosen layout, reason, every Prediction field, the
CPU time of a cold plan()); `compare` counts the cases whose layout or reason differs and
those whose predictions are the same to the bit, and prints the largest relative change of
each prediction field.
"""

from __future__ import annotations

import dataclasses
import json
import sys
import time
from typing import Any

MODELS = [
    "meta-llama/Llama-3.1-8B",
    "meta-llama/Llama-3.1-70B",
    "meta-llama/Llama-3.1-405B",
    "Qwen/Qwen3-30B-A3B",
    "Qwen/Qwen3-235B-A22B",
    "mistralai/Mixtral-8x7B-v0.1",
    "deepseek-ai/DeepSeek-V3",
    "openai/gpt-oss-20b",
    "openai/gpt-oss-120b",
    "google/gemma-3-27b-it",
    "Qwen/Qwen2.5-7B",
]
GPUS = ["l4", "a100-80gb", "h100-sxm", "h200"]
WORKLOADS: list[dict[str, Any]] = [
    {},
    {"input_tokens": 512, "output_tokens": 128, "concurrency": 32},
    {"input_tokens": 8000, "output_tokens": 500, "ttft_slo_ms": 2000, "tpot_slo_ms": 40},
    {"engine": "sglang"},
    {"concurrency": 64, "tpot_slo_ms": 30},
]


def run() -> None:
    for model in MODELS:
        for gpu in GPUS:
            for workload in WORKLOADS:
                start = time.process_time()
                row = plan_row(model, gpu, workload)
                row["ms"] = (time.process_time() - start) * 1e3
                print(json.dumps(row), flush=True)


def plan_row(model: str, gpu: str, workload: dict[str, Any]) -> dict[str, Any]:
    """One case's cold plan as a dump row (without its time)."""
    from tokenfleet.capacity import PlanError, PlanRequest, get_gpu, load, load_model, plan

    req = PlanRequest(arch=load_model(model), gpu=get_gpu(gpu), **workload)
    load.clear_caches()
    row: dict[str, Any]
    try:
        p = plan(req)
        row = {
            "tp": p.tensor_parallel_size,
            "pp": p.pipeline_parallel_size,
            "reason": p.reason,
            "pred": dataclasses.asdict(p.predicted),
        }
    except PlanError as e:
        row = {"error": str(e)}
    row["case"] = [model, gpu, workload]
    return row


def compare(old_path: str, new_path: str) -> None:
    with open(old_path) as f:
        old = [json.loads(line) for line in f]
    with open(new_path) as f:
        new = [json.loads(line) for line in f]
    if len(old) != len(new):
        sys.exit(f"{len(old)} cases against {len(new)}: not the same table")
    worst: dict[str, tuple[float, Any]] = {}
    errors = changed = identical = 0
    old_ms = new_ms = 0.0
    for a, b in zip(old, new, strict=True):
        old_ms += a["ms"]
        new_ms += b["ms"]
        if "error" in a or "error" in b:
            errors += 1
            if a.get("error") != b.get("error"):
                changed += 1
                print("CHANGED", a["case"], a.get("error"), "|", b.get("error"))
            continue
        if (a["tp"], a["pp"], a["reason"]) != (b["tp"], b["pp"], b["reason"]):
            changed += 1
            print("CHANGED", a["case"], a["reason"], "|", b["reason"])
        identical += a["pred"] == b["pred"]
        for key, x in a["pred"].items():
            y = b["pred"][key]
            if isinstance(x, bool) or not isinstance(x, int | float) or x == y:
                continue
            rel = abs(y - x) / max(abs(x), 1e-12)
            if rel > worst.get(key, (0.0, None))[0]:
                worst[key] = (rel, a["case"])
    planned = len(old) - errors
    print(
        f"{len(old)} cases ({errors} refused), layout or reason changed in {changed}, "
        f"predictions the same to the bit in {identical} of {planned}"
    )
    print(f"cold plan() CPU time, all cases: {old_ms:.0f} ms -> {new_ms:.0f} ms")
    for key, (rel, case) in sorted(worst.items(), key=lambda kv: -kv[1][0]):
        print(f"  largest relative change of {key}: {rel:.4%} at {case}")


if __name__ == "__main__":
    if len(sys.argv) == 2 and sys.argv[1] == "run":
        run()
    elif len(sys.argv) == 4 and sys.argv[1] == "compare":
        compare(sys.argv[2], sys.argv[3])
    else:
        sys.exit(__doc__)
