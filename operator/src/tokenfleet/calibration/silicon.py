"""Measured serving benchmarks in AIConfigurator's `silicon_sample.csv` format, scored.

Each row is one aggregated vLLM / SGLang configuration (model, GPU, TP / PP / EP, input and
output tokens) measured at a closed-loop concurrency (`batch_size`): mean TTFT and TPOT as
the client saw them. A row is predicted the way the benchmark ran it (bench.py); this module
reads the rows, maps them onto the planner's catalog and says which it cannot plan and why.

Pure: parsing takes text, prediction takes rows; the CLI (commands/calibrate_silicon.py)
reads the file.
"""

from __future__ import annotations

import csv
import math
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

from tokenfleet.capacity.architecture import ModelArch
from tokenfleet.capacity.catalog import load_model
from tokenfleet.capacity.engine_profiles import ENGINE_FACTS
from tokenfleet.capacity.types import Plan
from tokenfleet.errors import UserError

REQUIRED = (
    "backend",
    "model_path",
    "system",
    "isl",
    "osl",
    "batch_size",
    "tp_size",
    "silicon_ttft_ms",
    "silicon_tpot_ms",
)

# AIConfigurator's system names -> the GPU catalog's ids.
SYSTEMS = {"h100_sxm": "h100-sxm", "h200_sxm": "h200", "b200_sxm": "b200"}

# Checkpoints the catalog holds under another name: instruct / FP8 variants of a base
# model have its architecture; DeepSeek-R1 is DeepSeek-V3's architecture (same config.json
# apart from the name), and the quantization comes from the row's gemm_quant_mode.
MODELS = {
    "meta-llama/Llama-3.1-8B-Instruct": "meta-llama/Llama-3.1-8B",
    "nvidia/Llama-3.1-8B-Instruct-FP8": "meta-llama/Llama-3.1-8B",
    "meta-llama/Llama-3.1-70B-Instruct": "meta-llama/Llama-3.1-70B",
    "Qwen/Qwen3-235B-A22B-FP8": "Qwen/Qwen3-235B-A22B",
    "deepseek-ai/DeepSeek-R1": "deepseek-ai/DeepSeek-V3",
}


@dataclass(frozen=True)
class SiliconRow:
    line: int  # 1-based line of the file
    id: str
    engine: Literal["vllm", "sglang"] | str
    version: str
    model: str
    system: str
    gemm_quant: str
    isl: int
    osl: int
    concurrency: int
    tp: int
    pp: int
    attention_dp: int
    moe_tp: int
    moe_ep: int
    ttft_ms: float
    tpot_ms: float


def _number(raw: str, key: str, line: int, fix: str) -> float:
    try:
        return float(raw)
    except ValueError:
        raise UserError(f"line {line}: {key}", raw, "is not a number", fix) from None


def _int(row: dict[str, str], key: str, line: int, default: int | None = None) -> int:
    raw = (row.get(key) or "").strip()
    if not raw and default is not None:
        return default
    value = _number(raw, key, line, f"give {key} as an integer")
    if not value.is_integer():
        raise UserError(f"line {line}: {key}", raw, "is not an integer", f"give {key} as one")
    return int(value)


def _float(row: dict[str, str], key: str, line: int) -> float:
    raw = (row.get(key) or "").strip()
    value = _number(raw, key, line, f"give {key} in milliseconds")
    if not math.isfinite(value) or value <= 0:
        raise UserError(f"line {line}: {key}", raw, "must be positive", "drop or fix the row")
    return value


def parse(text: str) -> list[SiliconRow]:
    """Rows of a silicon CSV (lines starting with '#' are comments). Raises UserError naming
    the line and column of the first malformed value."""
    lines = text.splitlines()
    numbered = [(i + 1, ln) for i, ln in enumerate(lines) if ln.strip() and not ln.startswith("#")]
    if not numbered:
        raise UserError("silicon", "(empty)", "has no header row", "use silicon_sample.csv's")
    reader = csv.DictReader([ln for _, ln in numbered])
    missing = [k for k in REQUIRED if k not in (reader.fieldnames or [])]
    if missing:
        raise UserError(
            "silicon",
            ",".join(reader.fieldnames or []),
            f"header lacks {', '.join(missing)}",
            "use the columns of AIConfigurator's silicon_sample.csv",
        )
    out = []
    for (line, _), row in zip(numbered[1:], reader, strict=False):
        if (row.get("mode") or "agg") != "agg":
            continue  # disaggregated prefill / decode is not one replica
        out.append(
            SiliconRow(
                line=line,
                id=row.get("id") or f"line{line}",
                engine=(row["backend"] or "").strip(),
                version=(row.get("backend_version") or "").strip(),
                model=(row["model_path"] or "").strip(),
                system=(row["system"] or "").strip(),
                gemm_quant=(row.get("gemm_quant_mode") or "").strip(),
                isl=_int(row, "isl", line),
                osl=_int(row, "osl", line),
                concurrency=_int(row, "batch_size", line),
                tp=_int(row, "tp_size", line),
                pp=_int(row, "pp_size", line, 1),
                attention_dp=_int(row, "attention_dp_size", line, 1),
                moe_tp=_int(row, "moe_tp_size", line, 1),
                moe_ep=_int(row, "moe_ep_size", line, 1),
                ttft_ms=_float(row, "silicon_ttft_ms", line),
                tpot_ms=_float(row, "silicon_tpot_ms", line),
            )
        )
    return out


@dataclass(frozen=True)
class Resolved:
    """A row mapped onto the planner: what plan() is asked."""

    arch: ModelArch
    gpu_id: str
    quantization: str | None
    expert_parallel: bool


def resolve(row: SiliconRow) -> Resolved | str:
    """The planner's view of a row, or why it cannot plan it (one line)."""
    if row.engine not in ENGINE_FACTS:
        return f"engine {row.engine!r} is not modelled (vllm, sglang)"
    gpu_id = SYSTEMS.get(row.system)
    if gpu_id is None:
        return f"GPU {row.system} is not in the GPU catalog"
    if min(row.isl, row.osl, row.concurrency, row.tp, row.pp) < 1:
        return "isl, osl, batch_size, tp_size and pp_size must be positive"
    try:
        arch = load_model(MODELS.get(row.model, row.model))
    except UserError:
        return f"model {row.model} is not in the catalog"
    # GPUs per replica: TP x attention-DP for attention, MoE TP x EP for the experts; a row
    # whose MoE group is wider than its TP runs attention data-parallel even when the
    # attention_dp_size column is empty.
    if row.attention_dp > 1 or row.moe_tp * row.moe_ep > row.tp:
        return "attention data parallelism (attention-DP x TP GPUs) is not modelled"
    quant: str | None
    q = row.gemm_quant.lower()
    native = str(arch.quantization_config.get("quant_method", "")).lower()
    if q in ("", "bf16", "fp16", "float16"):
        quant = "none" if not native else None
    elif q in ("fp8", "fp8_block", "fp8_static"):
        quant = "fp8"
    elif q in ("nvfp4", "mxfp4") and native == "mxfp4":
        quant = None  # gpt-oss: the checkpoint's own MXFP4 experts, whatever the label
    else:
        return f"weight format {row.gemm_quant} is not modelled"
    if row.moe_tp > 1 and row.moe_ep > 1:
        return "MoE TP x EP mixes (moe_tp_size and moe_ep_size > 1) are not modelled"
    expert_parallel = row.moe_ep > 1 and arch.moe is not None
    return Resolved(arch, gpu_id, quant, expert_parallel)


@dataclass(frozen=True)
class Scored:
    row: SiliconRow
    plan: Plan
    ttft_ms: float
    tpot_ms: float

    @property
    def ttft_error(self) -> float:
        return self.ttft_ms / self.row.ttft_ms - 1

    @property
    def tpot_error(self) -> float:
        return self.tpot_ms / self.row.tpot_ms - 1


@dataclass(frozen=True)
class Refused:
    row: SiliconRow
    reason: str


@dataclass(frozen=True)
class Errors:
    """|error| quantiles and bias of one metric over a group of rows."""

    n: int
    median: float
    p90: float
    bias: float  # median of predicted / measured - 1: > 0 too pessimistic, < 0 optimistic


def _p90(values: Sequence[float]) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, math.ceil(0.9 * len(s)) - 1)]


def errors(values: Iterable[float]) -> Errors | None:
    v = list(values)
    if not v:
        return None
    return Errors(
        len(v),
        statistics.median(abs(e) for e in v),
        _p90([abs(e) for e in v]),
        statistics.median(v),
    )
