"""Where a catalog GPU type runs: the node labels each provider puts on its GPU nodes.

A pod selects its GPU by node labels, and which labels a node carries depends on who
labelled it. The operator is told which provider labels its nodes (`tokenfleet operator
--gpu-placement`, the chart's `gpuPlacement`; `tokenfleet render --gpu-placement`), and a
catalog overlay's `nodeLabels` (GPU.node_labels) overrides the mapping for one type.

- gfd: NVIDIA GPU Feature Discovery (the GPU Operator, or the device plugin's chart)
  labels `nvidia.com/gpu.product` with the device's name, spaces as dashes
  (k8s-device-plugin internal/lm/resource.go productLabel): NVIDIA-H100-80GB-HBM3. AMD's
  node labeller: `amd.com/gpu.product-name`. Under the device plugin's "mixed" MIG strategy
  the product stays the whole GPU's and each profile is a resource `nvidia.com/mig-<p>`
  (internal/lm/mig-strategy.go). Works on any cloud that runs GFD, AKS and EKS included.
- gke: GKE labels `cloud.google.com/gke-accelerator` with the accelerator type it was
  created with ("Run GPUs in GKE Standard node pools": nvidia-l4, nvidia-tesla-a100 for
  the A100 40GB, nvidia-a100-80gb, nvidia-h100-80gb (A3 High) and nvidia-h100-mega-80gb
  (A3 Mega), nvidia-h200-141gb, nvidia-b200). A MIG partition adds
  `cloud.google.com/gke-gpu-partition-size: <profile>`, and GKE exposes each partition as
  one `nvidia.com/gpu` ("Running multi-instance GPUs").
- eks: Karpenter on EKS labels `karpenter.k8s.aws/instance-gpu-name` with EC2's GPU name
  lower-cased and `karpenter.k8s.aws/instance-gpu-memory` with its MiB
  (karpenter-provider-aws pkg/providers/instancetype/types.go computeRequirements); the two
  A100s differ only in memory (p4d: 40960, p4de: 81920).
- eks-auto: EKS Auto Mode, the same labels under `eks.amazonaws.com/` ("Create a Node Pool
  for EKS Auto Mode", its label table).
- aks: every AKS node carries its VM size in `node.kubernetes.io/instance-type`; the GPU
  types map to the ND-series sizes that hold them (NVLink/Infinity Fabric within a node).
  (Node auto-provisioning's `karpenter.azure.com/sku-gpu-name` says "H100" for the SXM
  ND H100 v5 and the PCIe NC H100 v5 alike, so the size is the precise key.)

A type a provider does not offer (an L40S on GKE, an A10G on AKS) is refused with the fix:
another candidate, or nodeLabels in the catalog overlay.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal, get_args

from tokenfleet.capacity.gpus import GPU
from tokenfleet.errors import UserError

Provider = Literal["gfd", "gke", "eks", "eks-auto", "aks"]
PROVIDERS: tuple[str, ...] = get_args(Provider)
Labels = tuple[tuple[str, tuple[str, ...]], ...]  # key -> the values that match (any)

GKE_ACCELERATOR = "cloud.google.com/gke-accelerator"
GKE_PARTITION = "cloud.google.com/gke-gpu-partition-size"
INSTANCE_TYPE = "node.kubernetes.io/instance-type"

GKE: dict[str, tuple[str, ...]] = {
    "l4": ("nvidia-l4",),
    "a100-40gb": ("nvidia-tesla-a100",),
    "a100-80gb": ("nvidia-a100-80gb",),
    "h100-sxm": ("nvidia-h100-80gb", "nvidia-h100-mega-80gb"),
    "h200": ("nvidia-h200-141gb",),
    "b200": ("nvidia-b200",),
}
# EC2's GPU name (lower-cased by Karpenter) and, where one name covers two types, its MiB.
EC2: dict[str, tuple[str, str | None]] = {
    "a10g": ("a10g", None),
    "l4": ("l4", None),
    "l40s": ("l40s", None),
    "a100-40gb": ("a100", "40960"),
    "a100-80gb": ("a100", "81920"),
    "h100-sxm": ("h100", None),
    "h200": ("h200", None),
    "b200": ("b200", None),
}
AKS: dict[str, tuple[str, ...]] = {
    "a100-40gb": ("Standard_ND96asr_v4",),
    "a100-80gb": ("Standard_ND96amsr_A100_v4",),
    "h100-sxm": ("Standard_ND96isr_H100_v5",),
    "h200": ("Standard_ND96isr_H200_v5",),
    "mi300x": ("Standard_ND96isr_MI300X_v5",),
}
OFFERED: dict[str, Mapping[str, object]] = {"gke": GKE, "eks": EC2, "eks-auto": EC2, "aks": AKS}


@dataclass(frozen=True)
class NodeSelection:
    """What the engine pods ask for: nodes whose labels match (each key: any of its values)
    and the extended resource that counts the GPUs."""

    labels: Labels
    resource_name: str

    def node_selector(self) -> dict[str, str]:
        """The single-valued labels, as a nodeSelector."""
        return {key: values[0] for key, values in self.labels if len(values) == 1}

    def expressions(self) -> list[dict[str, object]]:
        """The labels with several values, as node-affinity matchExpressions (In)."""
        return [
            {"key": key, "operator": "In", "values": list(values)}
            for key, values in self.labels
            if len(values) > 1
        ]


def _check(provider: str) -> None:
    if provider not in PROVIDERS:
        raise UserError(
            "gpu-placement",
            provider,
            "is not a known provider of GPU node labels",
            f"use one of {', '.join(PROVIDERS)}",
        )


def _whole(gpu: GPU, provider: str) -> Labels:
    base = gpu.base_id
    if provider == "gfd":
        return ((gpu.node_label_key, (gpu.node_label_value,)),)
    if provider == "gke":
        if base in GKE:
            return ((GKE_ACCELERATOR, GKE[base]),)
    elif provider in ("eks", "eks-auto"):
        if base in EC2:
            domain = "karpenter.k8s.aws" if provider == "eks" else "eks.amazonaws.com"
            name, memory = EC2[base]
            labels: Labels = ((f"{domain}/instance-gpu-name", (name,)),)
            if memory is not None:
                labels += ((f"{domain}/instance-gpu-memory", (memory,)),)
            return labels
    elif base in AKS:
        return ((INSTANCE_TYPE, AKS[base]),)
    offered = sorted(OFFERED[provider])
    raise UserError(
        "gpu",
        gpu.id,
        f"is not a GPU type {provider} nodes are known to carry (it offers {', '.join(offered)})",
        "choose another type, or map it in the GPU catalog overlay: "
        f"gpus.{gpu.id}.nodeLabels: {{<label>: <value>}}",
    )


# The operator's provider (--gpu-placement), set once at start-up like the catalog overlay.
_default: list[str] = ["gfd"]


def configure(provider: str) -> None:
    """Set the process-wide provider (`tokenfleet operator --gpu-placement`)."""
    _check(provider)
    _default[0] = provider


def default_provider() -> str:
    return _default[0]


def node_selection(gpu: GPU, provider: str | None = None) -> NodeSelection:
    """The labels and resource that place `gpu` on `provider`'s nodes (None: the
    configured one). UserError when the provider does not offer that type and no override
    maps it."""
    provider = provider or _default[0]
    _check(provider)
    if gpu.node_labels is not None:
        return NodeSelection(gpu.node_labels, gpu.resource_name)
    labels = _whole(gpu, provider)
    resource = gpu.resource_name
    if gpu.mig_profile is not None and provider == "gke":
        # GKE partitions a node pool's GPUs itself and counts a partition as one GPU.
        labels += ((GKE_PARTITION, (gpu.mig_profile,)),)
        resource = "nvidia.com/gpu"
    return NodeSelection(labels, resource)
