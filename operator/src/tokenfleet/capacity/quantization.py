"""Bytes per parameter, per model part, from dtype and quantization.

Quantization methods store the *linear* layers (attention projections, MLPs, experts) in
fewer bits; embeddings, norms and usually the LM head stay in the activation dtype. Which
linear parts a checkpoint leaves unconverted is read from `modules_to_not_convert` /
`ignore` in its quantization_config (gpt-oss quantizes only its experts).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from tokenfleet.capacity.errors import PlanError

DTYPE_BYTES: dict[str, float] = {
    "auto": 2.0,
    "bfloat16": 2.0,
    "bf16": 2.0,
    "float16": 2.0,
    "fp16": 2.0,
    "half": 2.0,
    "float32": 4.0,
    "fp32": 4.0,
    "float": 4.0,
}

# Bytes per weight of a quantized linear layer, including its scales / zero points:
# 4-bit group quantization with group 128 adds an fp16 scale and a 4-bit zero per group.
_GROUP_4BIT = 0.5 + (2 + 0.5) / 128
QUANT_BYTES: dict[str, float] = {
    "fp8": 1.0 + 4 / (128 * 128),  # block-wise fp8 (DeepSeek) adds one fp32 scale per block
    "fbgemm_fp8": 1.0,
    "awq": _GROUP_4BIT,
    "gptq": _GROUP_4BIT,
    "awq_marlin": _GROUP_4BIT,
    "gptq_marlin": _GROUP_4BIT,
    "mxfp4": 0.5 + 1 / 32,  # 4-bit values, one e8m0 scale per 32
    "int8": 1.0,
}
QUANTIZATIONS = ("none", *sorted(k for k in QUANT_BYTES if k != "int8"), "compressed-tensors")

LINEAR_PARTS = ("attention", "dense_mlp", "experts", "shared_experts_and_router")


@dataclass(frozen=True)
class WeightFormat:
    """How many bytes one parameter of each model part takes."""

    dtype_bytes: float
    linear_bytes: float
    quantized_parts: frozenset[str]
    method: str

    def bytes_for(self, part: str) -> float:
        return self.linear_bytes if part in self.quantized_parts else self.dtype_bytes


def dtype_bytes(dtype: str, field: str = "dtype") -> float:
    try:
        return DTYPE_BYTES[dtype.lower()]
    except KeyError:
        raise PlanError(
            field, dtype, "unknown dtype", f"use one of {', '.join(sorted(DTYPE_BYTES))}"
        ) from None


def _compressed_tensors_bytes(cfg: Mapping[str, Any]) -> float:
    groups = cfg.get("config_groups") or {}
    for group in groups.values():
        weights = group.get("weights") or {}
        bits = int(weights.get("num_bits", 8))
        group_size = weights.get("group_size")
        scale_overhead = 2 / group_size if group_size else 0.0
        return bits / 8 + scale_overhead
    return 1.0


def _unconverted_parts(cfg: Mapping[str, Any]) -> set[str]:
    """Linear parts a checkpoint keeps in full precision, from its ignore lists."""
    names = [str(n) for n in (cfg.get("modules_to_not_convert") or cfg.get("ignore") or [])]
    skipped: set[str] = set()
    for name in names:
        if "self_attn" in name or "attn" in name.split(".")[-1]:
            skipped.add("attention")
        if "router" in name or name.endswith(".gate"):
            skipped.add("shared_experts_and_router")
    return skipped


def weight_format(
    config_quant: Mapping[str, Any], dtype: str = "auto", quantization: str | None = None
) -> WeightFormat:
    """Resolve the weight format from the checkpoint and the user's overrides.

    `quantization` (CLI --quantization / spec model.quantization) wins over the checkpoint's
    quantization_config; "none" forces unquantized weights.
    """
    base = dtype_bytes(dtype)
    method = (quantization or str(config_quant.get("quant_method", "")) or "none").lower()
    if method in ("none", ""):
        return WeightFormat(base, base, frozenset(), "none")
    if method == "compressed-tensors":
        linear = _compressed_tensors_bytes(config_quant)
    elif method in QUANT_BYTES:
        linear = QUANT_BYTES[method]
    else:
        raise PlanError(
            "quantization",
            method,
            "unknown quantization method",
            f"use one of {', '.join(QUANTIZATIONS)}",
        )
    from_checkpoint = quantization is None or quantization == config_quant.get("quant_method")
    skipped = _unconverted_parts(config_quant) if from_checkpoint else set()
    parts = frozenset(p for p in LINEAR_PARTS if p not in skipped)
    return WeightFormat(base, linear, parts, method)
