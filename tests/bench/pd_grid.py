"""`plan --serving auto` over the grid of docs/disaggregation.md: which kind wins, by how much.

    python tests/bench/pd_grid.py            # the whole grid, a Markdown table on stdout
    python tests/bench/pd_grid.py 8b h100    # the rows whose model and GPU contain these

Models: Llama-3.1-8B, Llama-3.1-70B (FP8), Qwen3-32B (FP8), gpt-oss-120b, DeepSeek-V3;
prompt / output 200/200, 1k/1k, 4k/500, 10k/1k; a tight SLO (TTFT 500 ms, TPOT 25 ms) and a
loose one (TTFT 3 s, TPOT 100 ms); H100 SXM and H200. A cell gives the kind plan() chose and
disaggregated's cost per good request against aggregated's ("-21%": disaggregation costs
21% less); auto chooses it only beyond the goodput searches' resolution (12%).
"""

from __future__ import annotations

import sys
import time

from tokenfleet.capacity import PlanError, PlanRequest, get_gpu, load_model, plan
from tokenfleet.capacity.disagg.request import ServingRequest

MODELS = (
    ("8b", "meta-llama/Llama-3.1-8B", None),
    ("70b-fp8", "meta-llama/Llama-3.1-70B", "fp8"),
    ("qwen3-32b-fp8", "Qwen/Qwen3-32B", "fp8"),
    ("gpt-oss-120b", "openai/gpt-oss-120b", None),
    ("deepseek-v3", "deepseek-ai/DeepSeek-V3", None),
)
SHAPES = ((200, 200), (1000, 1000), (4000, 500), (10000, 1000))
SLOS = (("tight", 500.0, 25.0), ("loose", 3000.0, 100.0))
GPUS = ("h100-sxm", "h200")


def cell(name: str, model: str, quant: str | None, gpu: str, shape: tuple[int, int],
         slo: tuple[str, float, float]) -> str:  # fmt: skip
    req = PlanRequest(
        arch=load_model(model),
        gpu=get_gpu(gpu),
        quantization=quant,
        input_tokens=shape[0],
        output_tokens=shape[1],
        ttft_slo_ms=slo[1],
        tpot_slo_ms=slo[2],
        serving=ServingRequest(mode="auto"),
    )
    try:
        p = plan(req)
    except PlanError as e:
        return f"no plan ({e.problem.split(':')[0][:40]})"
    s = p.serving
    assert s is not None
    d = s.disaggregated
    agg = s.aggregated_cost
    if d is None:
        return f"agg (no pair: {s.unavailable[:40]})"
    pd = d.cost_per_million_good_requests
    pair = f"P{d.prefill.plan.tensor_parallel_size}:D{d.decode.plan.tensor_parallel_size}"
    if agg == float("inf"):
        return f"**P/D** {pair} (no agg plan)"
    kind = "**P/D**" if s.mode == "disaggregated" else "agg"
    layout = s.aggregated_layout.replace(" x PP 1", "").replace(" ", "")
    return f"{kind} {pd / agg - 1:+.0%} ({pair} vs {layout})"


def main(filters: list[str]) -> None:
    print("| model | GPU | SLO | " + " | ".join(f"{i}/{o}" for i, o in SHAPES) + " |")
    print("|---|---|---|" + "---|" * len(SHAPES))
    for name, model, quant in MODELS:
        for gpu in GPUS:
            if not all(f in f"{name} {gpu}" for f in filters):
                continue
            for slo in SLOS:
                t = time.process_time()
                cells = [cell(name, model, quant, gpu, shape, slo) for shape in SHAPES]
                spent = time.process_time() - t
                print(f"| {name} | {gpu} | {slo[0]} | " + " | ".join(cells) + " |", flush=True)
                print(f"<!-- {spent:.0f} s -->", file=sys.stderr)


if __name__ == "__main__":
    main(sys.argv[1:])
