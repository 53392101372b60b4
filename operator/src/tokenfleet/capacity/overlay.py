"""A GPU catalog overlay: the cluster's own prices, node labels and extra GPU types over
the built-in catalog (capacity.gpus).

The operator loads one at start-up (`tokenfleet operator --gpu-catalog FILE`; the Helm
chart mounts its `gpuCatalog` value as that file from a ConfigMap). Format (YAML or JSON):

    gpus:
      h100-sxm: {pricePerHour: 2.49}            # a catalog GPU: only the fields given change
      rtx-pro-6000:                             # a new type: every field of NEW_REQUIRED
        name: NVIDIA RTX PRO 6000 Blackwell
        memoryGib: 94.97
        ...

A new type must also be in the CRD's enum of spec.gpu.type for the API server to accept
it: the chart adds the overlay's new types there when it templates the CRDs.
`parse_overlay(data) -> dict[id, GPU]` is pure; `apply_overlay` updates the catalog.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from tokenfleet.capacity.gpu_choice import OFFERS, GpuCandidate
from tokenfleet.capacity.gpus import GPU, GPUS
from tokenfleet.capacity.mig import slices
from tokenfleet.errors import UserError

# camelCase overlay key -> (GPU field, type).
FIELDS: dict[str, tuple[str, type]] = {
    "name": ("name", str),
    "pricePerHour": ("price_per_hour", float),
    "memoryGib": ("memory_gib", float),
    "bandwidthGbps": ("bandwidth_gbps", float),
    "bf16Tflops": ("bf16_tflops", float),
    "fp8Tflops": ("fp8_tflops", float),
    "interconnect": ("interconnect", str),
    "interconnectGbps": ("interconnect_gbps", float),
    "internodeGbps": ("internode_gbps", float),
    "gpusPerNode": ("gpus_per_node", int),
    "nodeLabelKey": ("node_label_key", str),
    "nodeLabelValue": ("node_label_value", str),
    "resourceName": ("resource_name", str),
    "nodeLabels": ("node_labels", dict),
}
# Kubernetes label syntax (a key's optional prefix is a DNS subdomain; names and values are
# at most 63 characters of alphanumerics, '-', '_' and '.', alphanumeric at both ends).
LABEL_NAME = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$")
LABEL_PREFIX = re.compile(r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$")
# What a new type must state; the rest default as in capacity.gpus.GPU (an NVIDIA device
# plugin resource and node label, a 400 Gb/s NIC per GPU between nodes).
NEW_REQUIRED = (
    "name", "memoryGib", "bandwidthGbps", "bf16Tflops", "fp8Tflops", "interconnect",
    "interconnectGbps", "gpusPerNode", "nodeLabelValue", "pricePerHour",
)  # fmt: skip
# A GPU id names a CRD enum value and appears in labels: lowercase, digits, '-' and '.'.
GPU_ID = re.compile(r"^[a-z0-9]([-a-z0-9.]{0,61}[a-z0-9])?$")


def _label_key(key: str) -> bool:
    prefix, _, name = key.rpartition("/")
    return bool(LABEL_NAME.match(name)) and (not prefix or bool(LABEL_PREFIX.match(prefix)))


def _node_labels(where: str, value: Any) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """nodeLabels: {key: value or [values]}; a node must match every key, any of its values
    (capacity/placement.py). Replaces the placement provider's mapping for this type."""
    if not isinstance(value, Mapping) or not value:
        raise UserError(
            where, value, "expected a mapping of node label to value(s)",
            "e.g. nodeLabels: {cloud.google.com/gke-accelerator: nvidia-l4}",
        )  # fmt: skip
    out = []
    for key, values in value.items():
        items = values if isinstance(values, list) else [values]
        if not isinstance(key, str) or not _label_key(key):
            raise UserError(f"{where}.{key}", key, "is not a label key", "e.g. example.com/gpu")
        if not items or not all(isinstance(v, str) and LABEL_NAME.match(v) for v in items):
            raise UserError(f"{where}.{key}", values, "is not a label value or a list of them",
                            "use 1-63 letters, digits, '-', '_' or '.'")  # fmt: skip
        out.append((key, tuple(items)))
    return tuple(out)


def _value(where: str, key: str, value: Any) -> Any:
    kind = FIELDS[key][1]
    if kind is dict:
        return _node_labels(where, value)
    if kind is str:
        if not isinstance(value, str) or not value:
            raise UserError(where, value, "must be a non-empty string", f"quote the {key}")
        return value
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise UserError(where, value, "must be a number", f"e.g. {key}: 2")
    if value < 0 or (value == 0 and key != "pricePerHour"):
        raise UserError(where, value, "must be positive", f"give the real {key}")
    return kind(value)


def _changes(gpu_id: str, fields: Any) -> dict[str, Any]:
    if not isinstance(fields, Mapping):
        raise UserError(f"gpus.{gpu_id}", fields, "expected a mapping", "e.g. {pricePerHour: 2}")
    changes = {}
    for key, value in fields.items():
        if key not in FIELDS:
            raise UserError(
                f"gpus.{gpu_id}.{key}", value, "unknown field", f"use {', '.join(FIELDS)}"
            )
        changes[FIELDS[key][0]] = _value(f"gpus.{gpu_id}.{key}", key, value)
    return changes


OFFER_FIELDS = ("type", "pricePerHour", "maxCount")


def parse_offers(data: Any, catalog: Mapping[str, GPU]) -> tuple[GpuCandidate, ...]:
    """`offers`: the GPU types this cluster offers, in order of preference, each with an
    optional price and maxCount: what spec.gpu.type auto chooses from when its spec lists no
    candidates (capacity/gpu_choice.py)."""
    offers = data.get("offers") or []
    if not isinstance(offers, list):
        raise UserError("offers", offers, "expected a list", "write offers: [{type: l4}, ...]")
    out: list[GpuCandidate] = []
    for i, offer in enumerate(offers):
        where = f"offers[{i}]"
        if not isinstance(offer, Mapping) or set(offer) - set(OFFER_FIELDS):
            raise UserError(where, offer, f"expected a mapping of {', '.join(OFFER_FIELDS)}",
                            "e.g. {type: h100-sxm, pricePerHour: 2.49, maxCount: 16}")  # fmt: skip
        gpu_id = str(offer.get("type"))
        if gpu_id not in catalog:
            raise UserError(f"{where}.type", gpu_id, "is not a GPU type of the catalog",
                            f"use one of {', '.join(catalog)} or add it under gpus")  # fmt: skip
        if any(c.gpu.id == gpu_id for c in out):
            raise UserError(f"{where}.type", gpu_id, "is offered twice", "list each type once")
        price = offer.get("pricePerHour")
        if price is not None:
            price = _value(f"{where}.pricePerHour", "pricePerHour", price)
        count = offer.get("maxCount")
        if count is not None and (
            isinstance(count, bool) or not isinstance(count, int) or count < 1
        ):
            raise UserError(f"{where}.maxCount", count, "must be a whole number >= 1",
                            "give the most GPUs of this type the cluster has")  # fmt: skip
        out.append(GpuCandidate(catalog[gpu_id].with_price(price), count))
    return tuple(out)


def parse_overlay(data: Any, catalog: Mapping[str, GPU] = GPUS) -> dict[str, GPU]:
    """The overlaid and added GPUs by id; one UserError naming the first bad entry."""
    if not isinstance(data, Mapping) or set(data) - {"gpus", "offers"}:
        raise UserError(
            "gpu catalog", type(data).__name__, "expected a mapping of gpus and offers",
            "write gpus: {<gpu id>: {pricePerHour: ...}}, offers: [{type: <gpu id>}, ...]",
        )  # fmt: skip
    gpus = data.get("gpus") or {}
    if not isinstance(gpus, Mapping):
        raise UserError("gpus", gpus, "expected a mapping of GPU id to fields", "see --help")
    out: dict[str, GPU] = {}
    for gpu_id, fields in gpus.items():
        changes = _changes(str(gpu_id), fields)
        if gpu_id in catalog:
            out[gpu_id] = replace(catalog[gpu_id], **changes)
            continue
        if not isinstance(gpu_id, str) or not GPU_ID.match(gpu_id):
            raise UserError(
                f"gpus.{gpu_id}", gpu_id, "not a valid GPU id",
                "use lowercase letters, digits, '-' and '.', e.g. rtx-pro-6000",
            )  # fmt: skip
        missing = [key for key in NEW_REQUIRED if FIELDS[key][0] not in changes]
        if missing:
            raise UserError(
                f"gpus.{gpu_id}", gpu_id,
                f"a new GPU type (not one of {', '.join(catalog)}) needs every datasheet field",
                f"add {', '.join(missing)}",
            )  # fmt: skip
        out[gpu_id] = GPU(id=gpu_id, **changes)
    parse_offers(data, {**catalog, **out})  # the offers name types of this catalog
    return out


def apply_overlay(data: Any) -> list[str]:
    """Overlay the process-wide catalog and set its offers; returns the ids changed or
    added. The MIG slices of a changed GPU follow it (price, bandwidth...), unless the
    overlay names them too."""
    changed = parse_overlay(data)
    catalog = {**GPUS, **changed}
    for derived in slices({k: catalog[k] for k in changed}):
        if derived.id not in changed:
            catalog[derived.id] = derived
    offers = parse_offers(data, catalog)  # before any change: all or nothing
    GPUS.update(catalog)
    OFFERS[:] = offers
    return sorted(changed)
