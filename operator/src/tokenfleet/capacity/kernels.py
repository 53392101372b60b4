"""What fraction of a chip's peak a weight format's kernels reach, by GPU generation: ONE table.

A format's cost depends on the chip: FP8 runs on FP8 tensor cores on Hopper / Ada / Blackwell
but only as a weight-only (Marlin) kernel on Ampere, which dequantises to BF16 and computes
at the BF16 peak; MXFP4 is native only on Blackwell and is dequantised elsewhere; AWQ / GPTQ
run as Marlin kernels (4-bit weights, BF16 math). MoE expert GEMMs reach less than dense
ones (`MOE_KERNELS`). Each entry names the source it was fitted to, or says it is a prior.

Efficiencies multiply the datasheet numbers of capacity/gpus.py:
- `compute`: the largest fraction of the `peak` TFLOPS a large GEMM-heavy step reaches
  (counting 2 x linear params x tokens + attention), reached as rows grow (see ramp()).
- `bandwidth`: fraction of HBM bandwidth a decode step reads weights and KV at.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from tokenfleet.capacity.gpus import GPU

Peak = Literal["bf16", "fp8", "fp4"]

# GPU id -> generation (the kernels available depend on it, not on the model).
GENERATION: dict[str, str] = {
    "a10g": "ampere",
    "a100-40gb": "ampere",
    "a100-80gb": "ampere",
    "l4": "ada",
    "l40s": "ada",
    "h100-sxm": "hopper",
    "h100-pcie": "hopper",
    "h200": "hopper",
    "b200": "blackwell",
    "mi300x": "cdna3",
}

# Rows at which a GEMM reaches half its large-M efficiency: fitted to the H100 bf16/fp8
# GEMM probe (perf-calibration.md: M=128 reaches ~40% of the M=2048 rate, M=16 ~5%) and to
# the 512-token prefill of the same run.
RAMP_ROWS = 64.0


def ramp(rows: float) -> float:
    """Fraction of the large-M GEMM rate a GEMM with `rows` rows reaches."""
    return rows / (rows + RAMP_ROWS) if rows > 0 else 0.0


@dataclass(frozen=True)
class Kernel:
    peak: Peak  # which datasheet peak the linear layers run at
    compute: float
    bandwidth: float
    source: str


_H100_PROBE = "perf-calibration.md H100 probe (prefill 512-8192, decode 1-256 x 0.5-8K)"
_FP8_PROBE = "perf-calibration.md FP8 GEMM probe: 62-66% of the FP8 peak at 2K-8K rows"
_BF16 = Kernel("bf16", 0.59, 0.77, _H100_PROBE)

# Weight-only kernels (Marlin for AWQ / GPTQ / FP8-on-Ampere, Marlin / Triton for MXFP4
# without FP4 tensor cores) dequantise in registers and run BF16 math: near the BF16 GEMM
# rate at large batches (Marlin paper, Frantar et al. 2024: ~0.9 of cuBLAS FP16 at 128+ rows)
# and near the ideal bandwidth of their smaller weights at small batches.
_MARLIN = 0.9

KERNELS: dict[tuple[str, str], Kernel] = {
    # Hopper: the probe chip.
    ("hopper", "bf16"): _BF16,
    # FP8 GEMMs read their 1-byte weights at a lower share of HBM bandwidth than BF16 at
    # 16-128 rows (probe: 1.4 / 2.3 TB/s vs 2.0 / 2.6), so x0.85.
    ("hopper", "fp8"): Kernel("fp8", 0.52, 0.65, _FP8_PROBE + "; x0.85 bandwidth at 16 rows"),
    ("hopper", "int4"): Kernel("bf16", 0.59 * _MARLIN, 0.70, "prior: Marlin x0.9 of bf16"),
    ("hopper", "mxfp4"): Kernel(
        "bf16",
        0.45,
        0.70,
        "held-in gpustack gpt-oss-120b H100 TP1 + TP2 rows; no FP4 tensor cores on Hopper",
    ),
    # Ada (L4, L40S): native FP8; GDDR6 parts, no data with current engines (perf-data.md).
    ("ada", "bf16"): Kernel("bf16", 0.53, 0.75, "prior: Hopper bf16 x0.9, no public data"),
    ("ada", "fp8"): Kernel("fp8", 0.47, 0.64, "prior: Hopper fp8 x0.9, no public data"),
    ("ada", "int4"): Kernel("bf16", 0.53 * _MARLIN, 0.68, "prior: Marlin x0.9 of bf16"),
    ("ada", "mxfp4"): Kernel("bf16", 0.53 * _MARLIN, 0.68, "prior: Marlin MXFP4 x0.9 of bf16"),
    # Ampere: no FP8 tensor cores; FP8 checkpoints run weight-only through Marlin.
    ("ampere", "bf16"): Kernel("bf16", 0.55, 0.72, "held-in A100 rows 0, 4, 5 of perf-data.csv"),
    ("ampere", "fp8"): Kernel(
        "bf16", 0.55 * _MARLIN, 0.68, "prior: vLLM FP8 Marlin (weight-only) on SM80, bf16 math"
    ),
    ("ampere", "int4"): Kernel("bf16", 0.55 * _MARLIN, 0.68, "prior: Marlin (designed on A100)"),
    ("ampere", "mxfp4"): Kernel("bf16", 0.55 * _MARLIN, 0.68, "prior: Marlin MXFP4 on SM80"),
    # Blackwell: native FP8 and FP4 tensor cores.
    ("blackwell", "bf16"): Kernel("bf16", 0.55, 0.76, "prior: Hopper bf16"),
    ("blackwell", "fp8"): Kernel("fp8", 0.50, 0.70, "prior: Hopper fp8"),
    ("blackwell", "int4"): Kernel("bf16", 0.55 * _MARLIN, 0.70, "prior: Marlin x0.9 of bf16"),
    ("blackwell", "mxfp4"): Kernel(
        "fp4", 0.45, 0.70, "prior: native MXFP4 tensor cores (2x the FP8 peak, datasheet)"
    ),
    # AMD CDNA3: ROCm kernels reach a smaller share of a higher peak.
    ("cdna3", "bf16"): Kernel("bf16", 0.40, 0.65, "prior: public MI300X vLLM reports ~40% MFU"),
    ("cdna3", "fp8"): Kernel("fp8", 0.35, 0.60, "prior: as bf16, hipBLASLt fp8"),
    ("cdna3", "int4"): Kernel("bf16", 0.30, 0.55, "prior: no Marlin on ROCm; Triton AWQ"),
    ("cdna3", "mxfp4"): Kernel("bf16", 0.30, 0.55, "prior: dequantising kernel"),
}


@dataclass(frozen=True)
class MoeKernel:
    """A format's fused MoE expert kernels, relative to its dense kernel (`Kernel`).

    One MoE layer's experts take max(touched experts' bytes / (bandwidth x
    `bandwidth_scale`), expert FLOPs / (peak x compute x `compute_scale` x
    rows / (rows + `ramp_rows`) x width / (width + `ramp_width`))) + `layer_latency_s`;
    rows = tokens x top-k / touched experts, width = an expert's intermediate size per rank
    (TP shards it: narrow shards leave the grouped GEMMs' tiles idle).
    """

    compute_scale: float
    bandwidth_scale: float
    layer_latency_s: float
    ramp_rows: float
    ramp_width: float
    source: str


_MOE_FIT = (
    "H100 fused-MoE kernel latencies of AIConfigurator 095f58a, moe-kernels-h100.csv "
    "(calibration/moe_kernel_fit.py: fit split, least mean |log error|)"
)

# By the experts' weight format (format_of of the expert weights). bf16 / fp8: fitted on the
# fit split of the H100 kernel rows, SGLang's and vLLM's Triton fused-MoE kernels pooled
# (fitting each engine apart moves its held-out median |error| by 1.3 points or less, not
# always down); held-out errors in docs/capacity-model.md and the unit test
# test_moe_kernel_fit.py. Bandwidth scales are x the dense kernel's (bf16 0.77, fp8 0.65 of
# HBM), so the experts are read at 0.85 / 0.94 of HBM: the kernel rows route with a skewed
# (power-law) router, which touches fewer experts than the uniform routing the step model
# counts. mxfp4: one set for both engines, the values fitted on the H100 gpt-oss serving rows
# (vLLM; within -5% to -7% of vLLM's OpenAI-triton_kernels rows up to 4K tokens). SGLang's
# MXFP4 kernel rows time its generic Triton fused-MoE kernel (a median 2.3x vLLM's), but
# SGLang serves gpt-oss on Hopper with triton_kernels too (moe_runner_backend auto -> triton_kernel,
# sglang 0.5.23 arg_groups/model_overrides/gpt_oss.py), so they are not fitted to:
# latency 30 us (grid 20-60 us, least median |TPOT error| on the fit split; at 60 us TPOT
# was +20.7% biased), ramp at half the rows of the fp8 GEMM probe (half the bytes). int4: a
# prior (the bf16 scales of the Qwen3-30B-A3B grouped-GEMM probe of perf-calibration.md,
# half the ramp rows).
MOE_KERNELS: dict[str, MoeKernel] = {
    "bf16": MoeKernel(0.95, 1.10, 20e-6, 128.0, 128.0, _MOE_FIT),
    "fp8": MoeKernel(0.60, 1.45, 40e-6, 64.0, 128.0, _MOE_FIT),
    "mxfp4": MoeKernel(
        0.80, 1.0, 30e-6, RAMP_ROWS / 2, 0.0, "held-in H100 gpt-oss-120b serving rows (vLLM)"
    ),
    "int4": MoeKernel(
        0.80, 1.0, 60e-6, RAMP_ROWS / 2, 0.0, "prior: perf-calibration.md Qwen3-30B-A3B probe"
    ),
}


def moe_kernel_for(fmt: str) -> MoeKernel:
    return MOE_KERNELS[fmt]


# Per-layer launch/latency floor inside a CUDA graph: the H100 decode probe at batch 1 sits
# ~1 ms (8B, 32 layers) above bytes / bandwidth, and ~2 ms (70B, 80 layers).
LAYER_LATENCY_S = 25e-6

# Attention-sink models (gpt-oss) on GPUs whose FlashAttention (v2) has no sinks: vLLM runs
# its Triton attention backend there. Prior: Triton attention at about half FA2's rate.
SINK_FALLBACK: dict[str, float] = {"ampere": 0.5, "ada": 0.5}

# Per request, outside the GPU: HTTP, tokenisation, hand-off to the engine core, and the
# first streamed chunk. Fitted to the held-in TTFT rows of perf-data.csv (0, 19, 20:
# residuals 7, 20 and 53 ms; their median) and used only by that check
# (calibration/perf_data.py); plan() takes the per-engine table of capacity/overheads.py, fitted
# on the H100 silicon rows.
REQUEST_OVERHEAD_S = 0.020

# The engine's own per-step CPU cost (scheduling, sampling, output processing) on top of the
# GPU time. Fitted to the held-in concurrency-4 Qwen3-8B H100 rows of perf-data.csv (vLLM 0.11
# TPOT 7.40 ms, SGLang 7.14 ms vs ~6.9 ms of GPU time).
STEP_OVERHEAD_S = 0.0005


def format_of(method: str, linear_bytes: float, dtype_bytes: float) -> str:
    """The kernel family of a weight format (quantization method, bytes per weight)."""
    if method == "mxfp4":
        return "mxfp4"
    if method in ("awq", "gptq", "awq_marlin", "gptq_marlin") or linear_bytes < 0.9:
        return "int4"
    if linear_bytes < dtype_bytes * 0.75:
        return "fp8"  # fp8, fbgemm_fp8, int8 and 8-bit compressed-tensors
    return "bf16"


def generation(gpu: GPU) -> str:
    return GENERATION.get(gpu.base_id, "hopper" if gpu.fp8_tflops > gpu.bf16_tflops else "ampere")


def kernel_for(gpu: GPU, fmt: str) -> Kernel:
    return KERNELS[(generation(gpu), fmt)]


def peak_tflops(gpu: GPU, peak: Peak) -> float:
    if peak == "fp4":
        return 2 * gpu.fp8_tflops
    return gpu.fp8_tflops if peak == "fp8" else gpu.bf16_tflops
