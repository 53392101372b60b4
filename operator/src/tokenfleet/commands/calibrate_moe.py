"""`tokenfleet calibrate --moe-kernels FILE.csv [--fit]`: the step model's MoE expert term
against measured H100 fused-MoE kernel latencies (calibration/moe_kernel_fit.py)."""

from __future__ import annotations

from pathlib import Path

from tokenfleet.calibration.moe_kernel_fit import parse_rows, refit, report
from tokenfleet.capacity import get_gpu
from tokenfleet.capacity.kernels import MOE_KERNELS
from tokenfleet.errors import UserError

FITTED = ("bf16", "fp8")  # mxfp4 keeps its serving-row fit (kernels.MOE_KERNELS)


def print_moe(path: str, fit: bool = False) -> int:
    try:
        text = Path(path).read_text()
    except OSError as e:
        raise UserError(
            "moe-kernels", path, f"cannot be read ({e.strerror})", "pass a CSV file"
        ) from None
    rows = parse_rows(text)
    gpu = get_gpu("h100-sxm")
    if fit:
        print("fitted on the fit split (capacity/kernels.py MOE_KERNELS holds the table):")
        fitted = refit(gpu, rows, FITTED)
        for fmt, k in fitted.items():
            held = MOE_KERNELS[fmt]
            print(
                f"  {fmt:5} compute x{k.compute_scale:.2f} (table {held.compute_scale:.2f})  "
                f"bandwidth x{k.bandwidth_scale:.2f} ({held.bandwidth_scale:.2f})  "
                f"latency {k.layer_latency_s * 1e6:.0f} us ({held.layer_latency_s * 1e6:.0f})  "
                f"ramp {k.ramp_rows:.0f} rows ({held.ramp_rows:.0f})  "
                f"width {k.ramp_width:.0f} ({held.ramp_width:.0f})"
            )
        print()
    print("MoE layer time vs measured (predicted / measured - 1), with kernels.MOE_KERNELS:")
    for line in report(gpu, rows, MOE_KERNELS):
        print("  " + line)
    return 0
