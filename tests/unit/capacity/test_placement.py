"""capacity/placement.py: each catalog type's node labels per provider, and the refusals."""

from __future__ import annotations

from dataclasses import replace

import pytest

from tokenfleet.capacity import get_gpu
from tokenfleet.capacity.placement import PROVIDERS, configure, default_provider, node_selection
from tokenfleet.errors import UserError

ROWS = [
    # (provider, gpu, labels, resource)
    ("gfd", "h100-sxm", {"nvidia.com/gpu.product": ["NVIDIA-H100-80GB-HBM3"]}, "nvidia.com/gpu"),
    ("gfd", "mi300x", {"amd.com/gpu.product-name": ["AMD-Instinct-MI300X"]}, "amd.com/gpu"),
    ("gfd", "a100-80gb-mig-3g.40gb", {"nvidia.com/gpu.product": ["NVIDIA-A100-SXM4-80GB"]},
     "nvidia.com/mig-3g.40gb"),
    ("gke", "l4", {"cloud.google.com/gke-accelerator": ["nvidia-l4"]}, "nvidia.com/gpu"),
    ("gke", "a100-40gb", {"cloud.google.com/gke-accelerator": ["nvidia-tesla-a100"]},
     "nvidia.com/gpu"),
    ("gke", "h100-sxm",
     {"cloud.google.com/gke-accelerator": ["nvidia-h100-80gb", "nvidia-h100-mega-80gb"]},
     "nvidia.com/gpu"),
    ("gke", "h100-sxm-mig-1g.10gb",
     {"cloud.google.com/gke-accelerator": ["nvidia-h100-80gb", "nvidia-h100-mega-80gb"],
      "cloud.google.com/gke-gpu-partition-size": ["1g.10gb"]}, "nvidia.com/gpu"),
    ("eks", "l40s", {"karpenter.k8s.aws/instance-gpu-name": ["l40s"]}, "nvidia.com/gpu"),
    ("eks", "a100-80gb", {"karpenter.k8s.aws/instance-gpu-name": ["a100"],
                          "karpenter.k8s.aws/instance-gpu-memory": ["81920"]}, "nvidia.com/gpu"),
    ("eks-auto", "a100-40gb", {"eks.amazonaws.com/instance-gpu-name": ["a100"],
                               "eks.amazonaws.com/instance-gpu-memory": ["40960"]},
     "nvidia.com/gpu"),
    ("eks", "h100-sxm-mig-3g.40gb", {"karpenter.k8s.aws/instance-gpu-name": ["h100"]},
     "nvidia.com/mig-3g.40gb"),
    ("aks", "h100-sxm", {"node.kubernetes.io/instance-type": ["Standard_ND96isr_H100_v5"]},
     "nvidia.com/gpu"),
    ("aks", "mi300x", {"node.kubernetes.io/instance-type": ["Standard_ND96isr_MI300X_v5"]},
     "amd.com/gpu"),
]  # fmt: skip


@pytest.mark.parametrize(("provider", "gpu", "labels", "resource"), ROWS)
def test_each_provider_selects_the_type_by_its_own_labels(
    provider: str, gpu: str, labels: dict[str, list[str]], resource: str
) -> None:
    sel = node_selection(get_gpu(gpu), provider)
    assert {k: list(v) for k, v in sel.labels} == labels
    assert sel.resource_name == resource
    single = {k: v[0] for k, v in labels.items() if len(v) == 1}
    assert sel.node_selector() == single
    assert [e["key"] for e in sel.expressions()] == [k for k, v in labels.items() if len(v) > 1]


@pytest.mark.parametrize(
    ("provider", "gpu"), [("gke", "l40s"), ("gke", "a10g"), ("eks", "mi300x"), ("aks", "l4")]
)
def test_a_type_the_provider_does_not_offer_is_refused_with_the_fix(
    provider: str, gpu: str
) -> None:
    with pytest.raises(UserError) as caught:
        node_selection(get_gpu(gpu), provider)
    text = str(caught.value)
    assert text.startswith(f"gpu={gpu}: is not a GPU type {provider} nodes are known to carry")
    assert f"gpus.{gpu}.nodeLabels" in text


def test_an_overlay_mapping_wins_over_the_provider() -> None:
    gpu = replace(get_gpu("l40s"), node_labels=(("example.com/gpu", ("l40s", "l40s-spot")),))
    for provider in PROVIDERS:
        sel = node_selection(gpu, provider)
        assert sel.labels == (("example.com/gpu", ("l40s", "l40s-spot")),)


def test_an_unknown_provider_names_the_known_ones() -> None:
    with pytest.raises(UserError, match="gpu-placement=azure: is not a known provider"):
        node_selection(get_gpu("l4"), "azure")


def test_the_process_default_is_what_render_uses_when_not_told() -> None:
    assert default_provider() == "gfd"
    try:
        configure("gke")
        assert node_selection(get_gpu("l4")).node_selector() == {
            "cloud.google.com/gke-accelerator": "nvidia-l4"
        }
    finally:
        configure("gfd")
