"""The MoE expert-kernel constants (kernels.MOE_KERNELS) against measured H100 kernel latencies.

The rows (moe-kernels-h100.csv: AIConfigurator's H100 moe_perf tables) time one MoE layer's
kernels on one H100 at a token count, expert shape, weight format and TP size. The step
model's time for the same layer is its MoE term alone: `expert_layer_model` builds a
StepModel of one MoE layer and nothing else (no dense weights, attention, LM head, comm or
engine CPU), so what is compared is what step_seconds computes.

Split: the rows of each expert shape at one TP size are held out, rotating 1, 2, 4, 8 over
the shapes in order of (hidden, intermediate, experts); the fit never sees them. `fit` grid-
searches the four constants of a format on the fit split for the least mean |log(predicted /
measured)|. Pure: callers pass the file's text.
"""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from statistics import median

from tokenfleet.capacity.comm import comm_for
from tokenfleet.capacity.gpus import GPU
from tokenfleet.capacity.kernels import MoeKernel, kernel_for, peak_tflops
from tokenfleet.capacity.performance import StepModel
from tokenfleet.errors import UserError

# The file's weight formats -> the step model's expert formats (kernels.format_of).
FORMATS = {"bfloat16": "bf16", "fp8_block": "fp8", "w4a16_mxfp4": "mxfp4"}
BYTES = {"bf16": 2.0, "fp8": 1.0, "mxfp4": 0.53125}  # MXFP4: 4 bits + a byte scale per 32
HELD_OUT_TP = (1, 2, 4, 8)

# The grid `fit` searches: compute x0.30-1.50, bandwidth from x0.60 up to the HBM datasheet
# rate, latency 0-80 us, ramp 32-256 rows, width ramp 0-512 columns.
COMPUTE_GRID = tuple(round(0.30 + 0.05 * i, 2) for i in range(25))
LATENCY_GRID = tuple(round(5e-6 * i, 7) for i in range(17))
RAMP_GRID = (32.0, 64.0, 128.0, 256.0)
WIDTH_GRID = (0.0, 32.0, 64.0, 128.0, 256.0, 512.0)


@dataclass(frozen=True)
class KernelRow:
    engine: str
    version: str
    fmt: str  # the step model's expert format: bf16, fp8, mxfp4
    hidden: int
    inter: int
    topk: int
    experts: int
    tp: int
    tokens: int
    latency_s: float

    @property
    def shape(self) -> tuple[int, int, int, int]:
        return self.hidden, self.inter, self.topk, self.experts


def parse_rows(text: str) -> list[KernelRow]:
    """The rows of a kernel-latency CSV ('#' lines are comments)."""
    body = "\n".join(line for line in text.splitlines() if not line.startswith("#"))
    rows = []
    for n, r in enumerate(csv.DictReader(io.StringIO(body)), start=2):
        dtype = r.get("moe_dtype", "")
        if dtype not in FORMATS:
            raise UserError(
                f"row {n}: moe_dtype", dtype, "not a known expert format", f"use {sorted(FORMATS)}"
            )
        try:
            row = KernelRow(
                engine=r["engine"],
                version=r["version"],
                fmt=FORMATS[dtype],
                hidden=int(r["hidden"]),
                inter=int(r["inter"]),
                topk=int(r["topk"]),
                experts=int(r["experts"]),
                tp=int(r["tp"]),
                tokens=int(r["tokens"]),
                latency_s=float(r["latency_ms"]) / 1e3,
            )
        except (KeyError, TypeError, ValueError) as e:
            raise UserError(
                f"row {n}",
                str(r),
                f"unreadable ({e})",
                "columns: engine, version, moe_dtype, "
                "hidden, inter, topk, experts, tp, tokens, latency_ms",
            ) from None
        sizes = (row.hidden, row.inter, row.topk, row.experts, row.tp, row.tokens)
        if min(sizes) < 1 or row.topk > row.experts or not row.latency_s > 0:
            raise UserError(
                f"row {n}",
                str(r),
                "sizes must be >= 1, topk <= experts and latency_ms > 0",
                "drop or fix the row",
            )
        rows.append(row)
    return rows


def held_out(rows: Sequence[KernelRow]) -> list[bool]:
    """Per row: True if it belongs to the held-out split (its shape's rotating TP size)."""
    shapes = sorted({(r.hidden, r.inter, r.experts) for r in rows})
    out_tp = {s: HELD_OUT_TP[i % len(HELD_OUT_TP)] for i, s in enumerate(shapes)}
    return [r.tp == out_tp[(r.hidden, r.inter, r.experts)] for r in rows]


def expert_layer_model(gpu: GPU, row: KernelRow, moe: MoeKernel) -> StepModel:
    """A StepModel of the row's one MoE layer, its experts' kernels and nothing else."""
    kernel = kernel_for(gpu, row.fmt)
    expert_params = 3 * row.hidden * row.inter  # gate, up and down projections
    return StepModel(
        dense_bytes=0.0,
        expert_bytes=expert_params * BYTES[row.fmt] / row.tp,
        moe_layers=1,
        experts=row.experts,
        experts_per_token=row.topk,
        dense_flops_per_token=0.0,
        expert_flops_per_token=2.0 * expert_params * row.topk / row.tp,
        head_flops_per_seq=0.0,
        attn_flops_coeff=0.0,
        kv_bytes_per_token_layer=0.0,
        full_layers=0,
        sliding_layers=0,
        window=0,
        linear_tflops=peak_tflops(gpu, kernel.peak),
        attention_tflops=gpu.bf16_tflops,
        compute_efficiency=kernel.compute,
        attention_efficiency=kernel_for(gpu, "bf16").compute,
        bandwidth=gpu.bandwidth_gbps,
        bandwidth_efficiency=kernel.bandwidth,
        layers=0,
        comm=comm_for(gpu, 1, 1, gpu.gpus_per_node, row.hidden, 1),
        overhead_s=0.0,
        moe_compute_scale=moe.compute_scale,
        moe_bandwidth_scale=moe.bandwidth_scale,
        expert_ramp_rows=moe.ramp_rows,
        moe_layer_latency_s=moe.layer_latency_s,
        expert_width=row.inter / row.tp,
        expert_ramp_width=moe.ramp_width,
    )


def predicted_seconds(gpu: GPU, rows: Iterable[KernelRow], moe: MoeKernel) -> list[float]:
    return [expert_layer_model(gpu, r, moe).step_seconds(r.tokens, 0, 0) for r in rows]


def errors(gpu: GPU, rows: Sequence[KernelRow], moe: MoeKernel) -> list[float]:
    """predicted / measured - 1, per row."""
    return [
        p / r.latency_s - 1 for p, r in zip(predicted_seconds(gpu, rows, moe), rows, strict=True)
    ]


def score(gpu: GPU, rows: Sequence[KernelRow], moe: MoeKernel) -> float:
    """The fit's objective: mean |log(predicted / measured)| (the silicon fit's, too)."""
    return sum(abs(math.log1p(e)) for e in errors(gpu, rows, moe)) / len(rows)


@dataclass(frozen=True)
class _Parts:
    """One row's step-model terms at unit scales: seconds = max(memory / bandwidth_scale,
    compute x (rows + ramp) / rows x (width + ramp_width) / width / compute_scale) + latency."""

    memory: float
    compute: float
    rows: float
    width: float
    measured: float


def _parts(gpu: GPU, row: KernelRow) -> _Parts:
    unit = MoeKernel(1.0, 1.0, 0.0, 0.0, 0.0, "")
    m = expert_layer_model(gpu, row, unit)
    touched = m.experts * (1 - (1 - m.experts_per_token / m.experts) ** row.tokens)
    rows = row.tokens * m.experts_per_token / max(touched, 1.0)
    memory = touched * m.expert_bytes / (m.bandwidth * 1e9 * m.bandwidth_efficiency)
    compute = (
        m.expert_flops_per_token * row.tokens / (m.linear_tflops * 1e12 * m.compute_efficiency)
    )
    return _Parts(memory, compute, rows, row.inter / row.tp, row.latency_s)


def _objective(parts: Sequence[_Parts], k: MoeKernel) -> float:
    total = 0.0
    for p in parts:
        compute = p.compute * (p.rows + k.ramp_rows) / p.rows * (p.width + k.ramp_width) / p.width
        body = max(p.memory / k.bandwidth_scale, compute / k.compute_scale)
        total += abs(math.log((body + k.layer_latency_s) / p.measured))
    return total / len(parts)


def _moved(k: MoeKernel, name: str, value: float) -> MoeKernel:
    """`k` with its constant `name` set to `value`."""
    values = {
        "compute_scale": k.compute_scale,
        "bandwidth_scale": k.bandwidth_scale,
        "layer_latency_s": k.layer_latency_s,
        "ramp_rows": k.ramp_rows,
        "ramp_width": k.ramp_width,
    }
    values[name] = value
    return MoeKernel(**values, source=k.source)


def fit(gpu: GPU, rows: Sequence[KernelRow], source: str = "fit") -> MoeKernel:
    """The grid point with the least mean |log error| over `rows` (one format).

    Coordinate descent on the grid (each constant in turn moves to its best grid value with
    the others held) from a start at each (ramp rows, ramp width) pair, until no move helps;
    the best of the local optima. The bandwidth scale stops at the HBM datasheet rate (the
    dense kernel's bandwidth efficiency x scale <= 1).
    """
    if not rows or len({r.fmt for r in rows}) != 1:
        raise ValueError("fit needs rows of exactly one expert format")
    top = 1.0 / kernel_for(gpu, rows[0].fmt).bandwidth
    bw_grid = tuple(round(0.60 + 0.05 * i, 2) for i in range(int((top - 0.60) / 0.05) + 1))
    grids: dict[str, tuple[float, ...]] = {
        "compute_scale": COMPUTE_GRID,
        "bandwidth_scale": (*bw_grid, top),
        "layer_latency_s": LATENCY_GRID,
        "ramp_rows": RAMP_GRID,
        "ramp_width": WIDTH_GRID,
    }
    parts = [_parts(gpu, r) for r in rows]
    best: tuple[float, MoeKernel] | None = None
    for ramp in RAMP_GRID:
        for width in WIDTH_GRID:
            k = MoeKernel(0.60, 1.0, 30e-6, ramp, width, source)
            s = _objective(parts, k)
            moved = True
            while moved:
                moved = False
                for name, grid in grids.items():
                    for value in grid:
                        trial = _moved(k, name, value)
                        t = _objective(parts, trial)
                        if t < s - 1e-12:
                            k, s, moved = trial, t, True
            if best is None or s < best[0]:
                best = (s, k)
    assert best is not None
    return best[1]


@dataclass(frozen=True)
class Summary:
    n: int
    median_abs: float
    p90_abs: float
    bias: float


def summarize(errs: Sequence[float]) -> Summary:
    if not errs:
        return Summary(0, math.nan, math.nan, math.nan)
    absolute = sorted(abs(e) for e in errs)
    p90 = absolute[min(len(absolute) - 1, int(0.9 * len(absolute)))]
    return Summary(len(errs), median(absolute), p90, median(errs))


TOKEN_BANDS = ((1, 8), (16, 64), (80, 512), (768, 4096), (6144, 1 << 30))


def report(gpu: GPU, rows: Sequence[KernelRow], table: dict[str, MoeKernel]) -> list[str]:
    """Lines: per format and split, then per engine and token band (held-out split)."""
    split = held_out(rows)
    lines = []
    for fmt in sorted({r.fmt for r in rows}):
        moe = table[fmt]
        for name, want in (("fit", False), ("held-out", True)):
            sel = [r for r, h in zip(rows, split, strict=True) if r.fmt == fmt and h == want]
            s = summarize(errors(gpu, sel, moe))
            if not s.n:
                lines.append(f"{fmt:5} {name:8} n=   0")
                continue
            lines.append(
                f"{fmt:5} {name:8} n={s.n:4}  median |err| {s.median_abs:6.1%}  "
                f"p90 {s.p90_abs:6.1%}  bias {s.bias:+6.1%}"
            )
        held = [r for r, h in zip(rows, split, strict=True) if r.fmt == fmt and h]
        for engine in sorted({r.engine for r in held}):
            bands = []
            for lo, hi in TOKEN_BANDS:
                sel = [r for r in held if r.engine == engine and lo <= r.tokens <= hi]
                if not sel:
                    continue
                s = summarize(errors(gpu, sel, moe))
                label = f"{lo}-{hi}" if hi < 1 << 30 else f"{lo}+"
                bands.append(f"{label}: {s.bias:+.0%}")
            lines.append(f"      held-out {engine:6} bias by tokens  " + ", ".join(bands))
    return lines


def refit(gpu: GPU, rows: Sequence[KernelRow], formats: Iterable[str]) -> dict[str, MoeKernel]:
    """The fit of each format on the fit split (formats with no fit rows are left out)."""
    split = held_out(rows)
    out = {}
    for fmt in formats:
        sel = [r for r, h in zip(rows, split, strict=True) if r.fmt == fmt and not h]
        if sel:
            out[fmt] = fit(gpu, sel)
    return out
