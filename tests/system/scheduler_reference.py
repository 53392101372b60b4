"""tokenfleet's scheduler against vLLM's own, on the same inputs in the same virtual time.

Each grid point is a replica (KV cache, batch limits, vLLM's admission rules of a version),
a step model (tokenfleet's, for a real model on a real GPU), a request shape and a
procedure. tokenfleet runs it as plan() does (capacity/load.py: lockstep groups, lazy
scheduler, fast-forward); vLLM's V1 Scheduler runs it step by step
(vllm_scheduler_driver.py, in the engines venv), each step as long as the same step model
says. Both report what `vllm bench serve` would: median TTFT, median TPOT, output tokens/s.

Procedures (tokenfleet.scheduling.virtual's, given to vLLM as the same arrivals):
- "steady": plan()'s default, a closed loop at concurrency C in its steady state (clients
  staggered at the start, the first wave not counted; virtual.closed_loop);
- "closed-loop": C clients all sending at t = 0, N prompts, every one counted;
- "burst": N prompts at t = 0;
- "poisson": N prompts at Poisson times (the same seeded times on both sides).
No client overhead on either side: this compares schedulers, not HTTP stacks.

`python tests/system/scheduler_reference.py` prints the table docs/evaluation.md holds.
"""

from __future__ import annotations

import base64
import json
import os
import pickle
import statistics
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass, replace
from functools import cache
from pathlib import Path
from typing import Any, Literal

from tokenfleet.capacity import PlanRequest, get_gpu, load, load_model, plan, step_model
from tokenfleet.capacity.performance import StepModel
from tokenfleet.scheduling.virtual import _quantile, closed_loop_starts, poisson_times

REPO = Path(__file__).resolve().parents[2]
DRIVER = Path(__file__).with_name("vllm_scheduler_driver.py")
Procedure = Literal["steady", "closed-loop", "burst", "poisson"]

# ModelConfig needs a config.json; the scheduler reads no weights and no tokenizer.
MODEL_CONFIG = {
    "architectures": ["LlamaForCausalLM"],
    "model_type": "llama",
    "hidden_size": 256,
    "intermediate_size": 512,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 4,
    "max_position_embeddings": 1 << 20,
    "vocab_size": 64,
    "torch_dtype": "float32",
    "bos_token_id": 1,
    "eos_token_id": 2,
}


@dataclass(frozen=True)
class Engine:
    """A step model and the admission rules of one vLLM version on one GPU."""

    model: str
    gpu: str
    version: str  # "0.11.0": first chunk admits, prefix cache; "0.32.0": whole sequence too
    tp: int = 1

    @property
    def label(self) -> str:
        return f"{self.model.split('/')[-1]} {self.gpu} vLLM {self.version}"


@dataclass(frozen=True)
class Point:
    engine: Engine
    kv_cache_tokens: int  # 0: what plan() sizes
    shape: tuple[int, int]  # prompt, output tokens
    procedure: Procedure
    concurrency: int = 1
    num_prompts: int = 0
    rate: float = 0.0  # Poisson; as a share of the replica's steady saturation when < 0
    max_num_batched_tokens: int = 0  # 0: vLLM's default on the GPU

    @property
    def name(self) -> str:
        load_ = {
            "steady": f"C={self.concurrency}",
            "closed-loop": f"C={self.concurrency} N={self.num_prompts}",
            "burst": f"N={self.num_prompts}",
            "poisson": (
                f"{-self.rate:g} x saturation N={self.num_prompts}"
                if self.rate < 0
                else f"{self.rate:g}/s N={self.num_prompts}"
            ),
        }[self.procedure]
        return f"{self.engine.label} {self.shape[0]}/{self.shape[1]} {self.procedure} {load_}"


@dataclass(frozen=True)
class Metrics:
    ttft_s: float  # median
    tpot_s: float  # median
    output_tps: float
    preemptions: int


@dataclass(frozen=True)
class Compared:
    point: Point
    held: int  # requests of this shape the KV cache holds
    ours: Metrics
    vllm: Metrics
    vllm_steps: int
    vllm_most_running: int
    vllm_most_waiting: int
    vllm_cpu_s: float

    @property
    def beyond_kv(self) -> bool:
        offered = max(self.point.concurrency, self.point.num_prompts)
        return self.point.procedure != "poisson" and offered > self.held

    def errors(self) -> dict[str, float]:
        """|ours / vLLM - 1| per metric."""
        o, v = self.ours, self.vllm
        return {
            "ttft": abs(o.ttft_s / v.ttft_s - 1),
            "tpot": abs(o.tpot_s / v.tpot_s - 1) if v.tpot_s > 0 else 0.0,
            "throughput": abs(o.output_tps / v.output_tps - 1),
        }


@cache
def _planned(engine: Engine) -> tuple[StepModel, load.Replica]:
    p = plan(
        PlanRequest(
            arch=load_model(engine.model),
            gpu=get_gpu(engine.gpu),
            engine_version=engine.version,
            tensor_parallel_size=engine.tp,
            concurrency=1,
            input_tokens=1024,
            output_tokens=128,
        )
    )
    replica = load.Replica.for_plan(p)
    # The engine's default seats, not the plan's (which caps them at what the KV holds).
    seats = 1024 if get_gpu(engine.gpu).large else 256
    return step_model(p), replace(replica, max_num_seqs=seats)


def replica_of(point: Point) -> tuple[StepModel, load.Replica]:
    timer, replica = _planned(point.engine)
    if point.kv_cache_tokens:
        replica = replace(replica, kv_cache_tokens=point.kv_cache_tokens)
    if point.max_num_batched_tokens:
        replica = replace(replica, max_num_batched_tokens=point.max_num_batched_tokens)
    longest = point.shape[0] + point.shape[1]
    length = max(longest, min(replica.max_model_len, replica.kv_cache_tokens // 16 * 16))
    return timer, replace(replica, max_model_len=length)


def rate_of(point: Point, timer: StepModel, replica: load.Replica) -> float:
    if point.rate >= 0:
        return point.rate
    prompt, out = point.shape
    full = load.closed(timer, replica, replica.held(prompt + out), prompt, out, overhead_s=0.0)
    return -point.rate * full.requests_per_second


def steady_measured(concurrency: int) -> int:
    """closed()'s count of requests after the warm-up wave, at one request per client."""
    return load.closed_measured(concurrency)


# -- tokenfleet's side ------------------------------------------------------------------------
def ours(point: Point) -> Metrics:
    timer, replica = replica_of(point)
    prompt, out = point.shape
    if point.procedure == "steady":
        s = load.closed(timer, replica, point.concurrency, prompt, out, overhead_s=0.0)
    elif point.procedure == "poisson":
        rate = rate_of(point, timer, replica)
        s = load.benchmark(timer, replica, "poisson", prompt, out, point.num_prompts,
                           rate=rate, overhead_s=0.0)  # fmt: skip
    else:
        s = load.benchmark(timer, replica, point.procedure, prompt, out, point.num_prompts,
                           point.concurrency, overhead_s=0.0)  # fmt: skip
    return Metrics(s.ttft_p50, s.tpot_p50, s.output_tokens_per_second, s.preemptions)


# -- vLLM's side ------------------------------------------------------------------------------
def driver_case(point: Point, timer_index: int) -> dict[str, Any]:
    timer, replica = replica_of(point)
    prompt, out = point.shape
    config = {
        "num_blocks": replica.kv_cache_tokens // replica.block_size,
        "block_size": replica.block_size,
        "max_num_seqs": replica.max_num_seqs,
        "max_num_batched_tokens": replica.max_num_batched_tokens,
        "max_model_len": replica.max_model_len,
        "long_prefill_token_threshold": replica.long_prefill_token_threshold,
        "reserve_full_sequence": replica.reserve_full_sequence,
        "prefix_caching": replica.prefix_caching,
    }
    case: dict[str, Any] = {"config": config, "timer": timer_index}
    if point.procedure in ("steady", "closed-loop"):
        c = point.concurrency
        if point.procedure == "steady":
            _, scheduler_config, _ = load.lockstep(replica, timer, 1, prompt + out)
            starts = closed_loop_starts(scheduler_config, timer, c, point.shape)
            total = 2 * c + steady_measured(c)  # every client busy until the last counted
        else:
            starts, total = [0.0] * c, point.num_prompts
        case["closed"] = {"starts": starts, "num_prompts": total, "overhead": 0.0,
                          "shapes": [list(point.shape)]}  # fmt: skip
    elif point.procedure == "burst":
        case["arrivals"] = [[0.0, prompt, out]] * point.num_prompts
    else:
        rate = rate_of(point, timer, replica)
        times = poisson_times(rate, point.num_prompts, load.BENCHMARK_SEED)
        case["arrivals"] = [[t, prompt, out] for t in times]
    return case


def metrics_of(point: Point, result: dict[str, Any]) -> Metrics:
    records = result["records"]
    if point.procedure == "steady":
        c = point.concurrency
        counted = records[c : c + steady_measured(c)]
        e2e = statistics.fmean(r["finished"] - r["arrival"] for r in counted)
        outputs = statistics.fmean(r["output"] for r in counted)
        throughput = c / e2e * outputs
    else:
        counted = records
        makespan = max(r["finished"] for r in counted)
        throughput = sum(r["output"] for r in counted) / makespan
    ttft = sorted(r["first"] - r["arrival"] for r in counted)
    tpot = sorted((r["last"] - r["first"]) / (r["output"] - 1) for r in counted if r["output"] > 1)
    return Metrics(
        _quantile(ttft, 0.5),
        _quantile(tpot, 0.5) if tpot else 0.0,
        throughput,
        sum(r["preemptions"] for r in records),
    )


def engines_python() -> str:
    python = os.environ.get("TOKENFLEET_ENGINES_PYTHON") or str(REPO / ".venv-engines/bin/python")
    if not Path(python).exists():
        raise RuntimeError(f"{python} does not exist: run `make engines`")
    return python


def run_vllm(points: Sequence[Point], workdir: Path) -> list[dict[str, Any]]:
    model_dir = workdir / "model"
    model_dir.mkdir(parents=True, exist_ok=True)
    (model_dir / "config.json").write_text(json.dumps(MODEL_CONFIG))
    timers: list[StepModel] = []
    cases = []
    for point in points:
        timer, _ = replica_of(point)
        if timer not in timers:
            timers.append(timer)
        cases.append(driver_case(point, timers.index(timer)))
    job = {
        "model_dir": str(model_dir),
        "timers": [base64.b64encode(pickle.dumps(t)).decode() for t in timers],
        "cases": cases,
    }
    env = {**os.environ, "PYTHONPATH": str(REPO / "operator/src"), "HF_HUB_OFFLINE": "1"}
    done = subprocess.run(
        [engines_python(), str(DRIVER)],
        input=json.dumps(job),
        capture_output=True,
        text=True,
        env=env,
        timeout=1800,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"the vLLM scheduler driver failed:\n{done.stderr[-4000:]}")
    results: list[dict[str, Any]] = json.loads(done.stdout.strip().splitlines()[-1])
    return results


def compare(points: Sequence[Point], workdir: Path) -> list[Compared]:
    out = []
    for point, result in zip(points, run_vllm(points, workdir), strict=True):
        _, replica = replica_of(point)
        out.append(
            Compared(
                point,
                replica.held(sum(point.shape)),
                ours(point),
                metrics_of(point, result),
                result["steps"],
                result["most_running"],
                result["most_waiting"],
                result["cpu_seconds"],
            )
        )
    return out


# -- the grid ---------------------------------------------------------------------------------
QWEN_A100_011 = Engine("Qwen/Qwen3-32B", "a100-80gb", "0.11.0")
QWEN_A100_032 = Engine("Qwen/Qwen3-32B", "a100-80gb", "0.32.0")
QWEN_H100_032 = Engine("Qwen/Qwen3-32B", "h100-sxm", "0.32.0")
LLAMA_L4_011 = Engine("meta-llama/Llama-3.1-8B", "l4", "0.11.0")
LLAMA_H100_032 = Engine("meta-llama/Llama-3.1-8B", "h100-sxm", "0.32.0")


def grid() -> list[Point]:
    points: list[Point] = []

    def around(engine: Engine, kv: int, shape: tuple[int, int], held: int, **kw: Any) -> None:
        """Concurrency from below the KV cache to 4x what it holds, every procedure."""
        for c in sorted({max(1, held // 2), held, 2 * held, 4 * held}):
            points.append(Point(engine, kv, shape, "steady", c, **kw))
            points.append(Point(engine, kv, shape, "closed-loop", c, num_prompts=2 * c, **kw))
        points.append(Point(engine, kv, shape, "burst", num_prompts=3 * held, **kw))
        for share in (0.5, 0.9):
            points.append(Point(engine, kv, shape, "poisson", num_prompts=max(40, 3 * held),
                                rate=-share, **kw))  # fmt: skip

    # Qwen3-32B on one 80 GB GPU (the KV cache plan() sizes, ~12 requests of 4K): vLLM
    # 0.11's admission (first chunk, prefix cache) and 0.32's (whole sequence too).
    around(QWEN_A100_011, 0, (4096, 256), 12)
    around(QWEN_A100_032, 0, (4096, 256), 12)
    # 32K prompts: one request at a time in the cache, four chunks of 8192 each.
    points.append(Point(QWEN_H100_032, 0, (32768, 64), "steady", 1))
    for c in (2, 4):
        points.append(Point(QWEN_H100_032, 0, (32768, 64), "steady", c))
        points.append(Point(QWEN_H100_032, 0, (32768, 64), "closed-loop", c, num_prompts=2 * c))
    # Short prompts, small token budget (L4 defaults: 2048), a KV cache of 32 requests.
    around(LLAMA_L4_011, 32 * 256, (128, 128), 32)
    # Mid prompts at 0.32 on H100, a cache of 96 requests: lockstep groups above 64.
    for c in (48, 96, 192, 384):
        points.append(Point(LLAMA_H100_032, 96 * 2560, (2048, 512), "steady", c))
    points.append(Point(LLAMA_H100_032, 96 * 2560, (2048, 512), "burst", num_prompts=192))
    return points


def summary(rows: Sequence[Compared]) -> dict[str, tuple[float, float]]:
    """(median, max) of |ours / vLLM - 1| per metric."""
    out = {}
    for metric in ("ttft", "tpot", "throughput"):
        values = [r.errors()[metric] for r in rows]
        out[metric] = (statistics.median(values), max(values))
    return out


def table(rows: Sequence[Compared]) -> str:
    lines = [
        "| point | held | TTFT ms vLLM / ours | TPOT ms vLLM / ours | out tok/s vLLM / ours "
        "| preemptions vLLM / ours |",
        "|---|---|---|---|---|---|",
    ]
    for r in rows:
        v, o = r.vllm, r.ours
        lines.append(
            f"| {r.point.name} | {r.held} | {v.ttft_s * 1e3:.0f} / {o.ttft_s * 1e3:.0f} "
            f"| {v.tpot_s * 1e3:.1f} / {o.tpot_s * 1e3:.1f} "
            f"| {v.output_tps:.0f} / {o.output_tps:.0f} | {v.preemptions} / {o.preemptions} |"
        )
    for label, part in (("all", rows), ("beyond the KV cache", [r for r in rows if r.beyond_kv])):
        s = summary(part)
        lines.append(
            f"\n{label} ({len(part)} points): median |ours / vLLM - 1| "
            + ", ".join(f"{k} {m:.1%} (max {x:.1%})" for k, (m, x) in s.items())
        )
    return "\n".join(lines)


if __name__ == "__main__":
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        compared = compare(grid(), Path(tmp))
    print(table(compared))
    print(f"vLLM side: {sum(c.vllm_cpu_s for c in compared):.0f} s CPU", file=sys.stderr)
