"""MIG slices as catalog GPU types: a small model plans onto a slice, and several
LLMServices share one GPU.

Profiles, per the NVIDIA MIG User Guide ("Supported MIG Profiles",
docs.nvidia.com/datacenter/tesla/mig-user-guide/supported-mig-profiles.html): an A100 or an
H100 has 7 compute slices and 8 memory slices; a profile `<n>g.<m>gb` owns n/7 of the SMs
and a fraction of the memory, and a GPU yields at most `instances` of it. The memory a
slice shows CUDA and its SM count are those `nvidia-smi mig -lgip` prints (A100-SXM4-80GB:
98 SMs in 7 slices of the 108; H100 80GB HBM3: 132). What is derived:
- bandwidth: the memory slices' share of the GPU's (each memory slice brings its own memory
  controllers and L2 slice, which is why MIG isolates bandwidth);
- TFLOPS: the slice's SMs over the whole GPU's;
- price: the GPU's price over the instances it yields (a 3g.40gb is half an H100: two fit),
  since a node's GPU is bought whole whatever it is cut into; override with an overlay;
- one slice per replica: a CUDA process enumerates one MIG device (MIG User Guide, "CUDA
  Device Enumeration") and MIG has no GPU-to-GPU peer-to-peer, so TP and PP stay 1;
- resource `nvidia.com/mig-<profile>`: the NVIDIA device plugin's "mixed" strategy
  (k8s-device-plugin internal/lm/mig-strategy.go), under which GPU Feature Discovery keeps
  `nvidia.com/gpu.product` as the parent GPU's name (capacity/placement.py maps the others).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace

from tokenfleet.capacity.gpus import GPU

MEMORY_SLICES = 8


@dataclass(frozen=True)
class Profile:
    name: str  # e.g. "3g.40gb"
    memory_slices: int  # of MEMORY_SLICES
    sms: int  # streaming multiprocessors of the slice (nvidia-smi mig -lgip)
    memory_gib: float  # what CUDA sees (nvidia-smi mig -lgip, GiB)
    instances: int  # most slices of this profile on one GPU


# parent catalog id -> (the whole GPU's SMs, its profiles). `nvidia-smi mig -lgip` on an
# A100-SXM4-80GB (driver R525) and an H100 80GB HBM3 (R535); memory fractions and instance
# counts as the MIG User Guide's tables.
PROFILES: dict[str, tuple[int, tuple[Profile, ...]]] = {
    "a100-80gb": (108, (
        Profile("1g.10gb", 1, 14, 9.50, 7),
        Profile("1g.20gb", 2, 14, 19.50, 4),
        Profile("2g.20gb", 2, 28, 19.50, 3),
        Profile("3g.40gb", 4, 42, 39.25, 2),
        Profile("4g.40gb", 4, 56, 39.25, 1),
        Profile("7g.80gb", 8, 98, 79.00, 1),
    )),
    "h100-sxm": (132, (
        Profile("1g.10gb", 1, 16, 9.75, 7),
        Profile("1g.20gb", 2, 26, 19.62, 4),
        Profile("2g.20gb", 2, 32, 19.62, 3),
        Profile("3g.40gb", 4, 60, 39.50, 2),
        Profile("4g.40gb", 4, 64, 39.50, 1),
        Profile("7g.80gb", 8, 132, 79.25, 1),
    )),
}  # fmt: skip


def slice_id(parent: str, profile: str) -> str:
    return f"{parent}-mig-{profile}"


def slice_of(parent: GPU, profile: Profile, total_sms: int) -> GPU:
    compute = profile.sms / total_sms
    return replace(
        parent,
        id=slice_id(parent.id, profile.name),
        name=f"{parent.name} MIG {profile.name}",
        # nvidia-smi rounds (an H100's 7g.80gb prints 79.25 GiB; CUDA sees 79.19 of it whole)
        memory_gib=min(profile.memory_gib, parent.memory_gib),
        bandwidth_gbps=round(parent.bandwidth_gbps * profile.memory_slices / MEMORY_SLICES, 1),
        bf16_tflops=round(parent.bf16_tflops * compute, 1),
        fp8_tflops=round(parent.fp8_tflops * compute, 1),
        interconnect="none (one MIG device per replica)",
        interconnect_gbps=1.0,
        gpus_per_node=1,
        price_per_hour=round(parent.price_per_hour / profile.instances, 4),
        resource_name=f"nvidia.com/mig-{profile.name}",
        parent=parent.id,
        mig_profile=profile.name,
        node_labels=None,
    )


def slices(catalog: Mapping[str, GPU]) -> list[GPU]:
    """Every MIG slice of the catalog's MIG-capable GPUs, derived from their current entries."""
    out = []
    for parent_id, (total_sms, profiles) in PROFILES.items():
        parent = catalog.get(parent_id)
        if parent is None:
            continue
        out += [slice_of(parent, profile, total_sms) for profile in profiles]
    return out
