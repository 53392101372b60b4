"""A GPU catalog overlay: the cluster's own prices and node labels over capacity.gpus.

The operator loads one at start-up (`tokenfleet operator --gpu-catalog FILE`; the Helm
chart mounts its `gpuCatalog` value as that file from a ConfigMap). Format (YAML or JSON):

    gpus:
      h100-sxm: {pricePerHour: 2.49, nodeLabelValue: NVIDIA-H100-80GB-HBM3}
      l4: {pricePerHour: 0.55}

Only GPU types already in the catalog can be overlaid: spec.gpu.type is an enum in the
CRD, so a new type also needs a new CRD (see tokenfleet.api.gpu.GpuType).
`parse_overlay(data) -> dict[id, GPU]` is pure; `apply_overlay` updates the catalog.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from tokenfleet.capacity.errors import PlanError
from tokenfleet.capacity.gpus import GPU, GPUS

# camelCase overlay key -> (GPU field, type); the fields a cluster may legitimately differ on.
FIELDS: dict[str, tuple[str, type]] = {
    "pricePerHour": ("price_per_hour", float),
    "memoryGib": ("memory_gib", float),
    "bandwidthGbps": ("bandwidth_gbps", float),
    "bf16Tflops": ("bf16_tflops", float),
    "fp8Tflops": ("fp8_tflops", float),
    "interconnectGbps": ("interconnect_gbps", float),
    "internodeGbps": ("internode_gbps", float),
    "gpusPerNode": ("gpus_per_node", int),
    "nodeLabelKey": ("node_label_key", str),
    "nodeLabelValue": ("node_label_value", str),
}


def _value(where: str, key: str, value: Any) -> Any:
    kind = FIELDS[key][1]
    if kind is str:
        if not isinstance(value, str) or not value:
            raise PlanError(where, value, "must be a non-empty string", f"quote the {key}")
        return value
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise PlanError(where, value, "must be a number", f"e.g. {key}: 2")
    if value < 0 or (value == 0 and key != "pricePerHour"):
        raise PlanError(where, value, "must be positive", f"give the real {key}")
    return kind(value)


def parse_overlay(data: Any, catalog: Mapping[str, GPU] = GPUS) -> dict[str, GPU]:
    """The overlaid GPUs by id; one PlanError naming the first bad entry."""
    if not isinstance(data, Mapping) or set(data) - {"gpus"}:
        raise PlanError(
            "gpu catalog", type(data).__name__, "expected a mapping with one key, gpus",
            "write gpus: {<gpu id>: {pricePerHour: ...}}",
        )  # fmt: skip
    gpus = data.get("gpus") or {}
    if not isinstance(gpus, Mapping):
        raise PlanError("gpus", gpus, "expected a mapping of GPU id to fields", "see --help")
    out: dict[str, GPU] = {}
    for gpu_id, fields in gpus.items():
        if gpu_id not in catalog:
            raise PlanError(
                f"gpus.{gpu_id}", gpu_id, "not a GPU type of the catalog (new types need a "
                "CRD change: spec.gpu.type is an enum)", f"use one of {', '.join(catalog)}",
            )  # fmt: skip
        if not isinstance(fields, Mapping):
            raise PlanError(
                f"gpus.{gpu_id}", fields, "expected a mapping", "e.g. {pricePerHour: 2}"
            )
        changes = {}
        for key, value in fields.items():
            if key not in FIELDS:
                raise PlanError(
                    f"gpus.{gpu_id}.{key}", value, "unknown field", f"use {', '.join(FIELDS)}"
                )
            changes[FIELDS[key][0]] = _value(f"gpus.{gpu_id}.{key}", key, value)
        out[gpu_id] = replace(catalog[gpu_id], **changes)
    return out


def apply_overlay(data: Any) -> list[str]:
    """Overlay the process-wide catalog; returns the ids changed."""
    changed = parse_overlay(data)
    GPUS.update(changed)
    return sorted(changed)
