"""Spellings shared by both engines' argument builders."""

from __future__ import annotations

from tokenfleet.capacity.types import Plan

# Both engines' --dtype accept these names; the planner also takes the short forms.
_DTYPES = {
    "bf16": "bfloat16",
    "fp16": "float16",
    "half": "float16",
    "fp32": "float32",
    "float": "float32",
}


def engine_dtype(dtype: str) -> str | None:
    """The --dtype value, or None when the engine should use the checkpoint's own dtype."""
    d = dtype.strip().lower()
    if d in ("", "auto"):
        return None
    return _DTYPES.get(d, d)


def requested_quantization(plan: Plan) -> str | None:
    """The --quantization value, or None to let the engine read the checkpoint's config.

    Only a method the user asked for is passed: the planner also reports methods it found
    in the checkpoint's quantization_config, and both engines detect those themselves (and
    name some of them differently, e.g. compressed-tensors variants).
    """
    method = plan.request.quantization if plan.request is not None else plan.quantization
    if method is None or method.strip().lower() in ("", "none"):
        return None
    return method


def fmt_fraction(value: float) -> str:
    """A memory fraction without float noise: 0.9 not 0.9000000000000001."""
    return f"{value:.4f}".rstrip("0").rstrip(".")
