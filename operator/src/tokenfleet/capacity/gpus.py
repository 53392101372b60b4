"""The GPU catalog.

`memory_gib` is the total the CUDA (or ROCm) runtime reports (torch.cuda.mem_get_info), which
is what engines multiply by their memory fraction, not the marketing number: an "80 GB" H100
shows 79.19 GiB. Bandwidth and dense (no-sparsity) TFLOPS are the vendors' datasheet
figures; efficiencies are applied in performance.py, in one table. Prices are rounded
public on-demand prices per GPU-hour (USD, 2025), meant to be overridden
(`--price-per-gpu-hour`, spec gpu.pricePerHour).
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass, replace

from tokenfleet.capacity.errors import PlanError

NVIDIA_LABEL = "nvidia.com/gpu.product"  # set by NVIDIA GPU feature discovery
AMD_LABEL = "amd.com/gpu.product-name"  # set by the AMD GPU operator's node labeller


@dataclass(frozen=True)
class GPU:
    id: str
    name: str
    memory_gib: float
    bandwidth_gbps: float  # HBM / GDDR bandwidth, GB/s
    bf16_tflops: float  # dense
    fp8_tflops: float  # dense; equals bf16 where there are no FP8 tensor cores
    interconnect: str
    interconnect_gbps: float  # GPU-to-GPU inside a node, per GPU per direction, GB/s
    gpus_per_node: int
    node_label_value: str
    price_per_hour: float
    node_label_key: str = NVIDIA_LABEL
    resource_name: str = "nvidia.com/gpu"
    internode_gbps: float = 50.0  # 400 Gb/s RDMA NIC per GPU
    # A MIG slice (capacity/mig.py): the catalog id of the GPU it is cut from, and its profile.
    parent: str | None = None
    mig_profile: str | None = None
    # Node labels that select it, by key (several values: any of them), over the placement
    # provider's mapping (capacity/placement.py); set by a catalog overlay's nodeLabels.
    node_labels: tuple[tuple[str, tuple[str, ...]], ...] | None = None

    @property
    def base_id(self) -> str:
        """The whole GPU's id: kernels and engine defaults go by the silicon, not the slice."""
        return self.parent or self.id

    @property
    def large(self) -> bool:
        """vLLM raises its batch defaults on GPUs of 70 GiB or more that are not A100s."""
        return self.memory_gib >= 70 and not self.id.startswith("a100")

    def with_price(self, price: float | None) -> GPU:
        return self if price is None else replace(self, price_per_hour=price)


GPUS: dict[str, GPU] = {
    g.id: g
    for g in (
        GPU("a10g", "NVIDIA A10G", 22.05, 600, 70, 70, "PCIe Gen4", 16, 8, "NVIDIA-A10G", 1.01),
        GPU("l4", "NVIDIA L4", 22.05, 300, 121, 242, "PCIe Gen4", 16, 8, "NVIDIA-L4", 0.80),
        GPU("l40s", "NVIDIA L40S", 44.42, 864, 362, 733, "PCIe Gen4", 16, 8, "NVIDIA-L40S", 1.86),
        GPU(
            "a100-40gb", "NVIDIA A100-SXM4-40GB", 39.4, 1555, 312, 312, "NVLink 3", 300, 8,
            "NVIDIA-A100-SXM4-40GB", 2.10,
        ),
        GPU(
            "a100-80gb", "NVIDIA A100-SXM4-80GB", 79.15, 2039, 312, 312, "NVLink 3", 300, 8,
            "NVIDIA-A100-SXM4-80GB", 2.50,
        ),
        GPU(
            "h100-sxm", "NVIDIA H100 80GB HBM3", 79.19, 3350, 989, 1979, "NVLink 4", 450, 8,
            "NVIDIA-H100-80GB-HBM3", 3.50,
        ),
        GPU(
            "h100-pcie", "NVIDIA H100 PCIe", 79.19, 2000, 756, 1513, "PCIe Gen5", 32, 8,
            "NVIDIA-H100-PCIe", 2.80,
        ),
        GPU("h200", "NVIDIA H200", 139.8, 4800, 989, 1979, "NVLink 4", 450, 8, "NVIDIA-H200", 4.50),
        GPU("b200", "NVIDIA B200", 178.4, 8000, 2250, 4500, "NVLink 5", 900, 8, "NVIDIA-B200", 6.5),
        GPU(
            "mi300x", "AMD Instinct MI300X", 191.98, 5300, 1307, 2615, "Infinity Fabric", 448, 8,
            "AMD-Instinct-MI300X", 3.50, node_label_key=AMD_LABEL, resource_name="amd.com/gpu",
        ),
    )
}  # fmt: skip


def _add_mig_slices() -> None:
    from tokenfleet.capacity.mig import slices  # it builds on GPU, defined above

    GPUS.update({g.id: g for g in slices(GPUS)})


_add_mig_slices()


def get_gpu(gpu_id: str, field: str = "gpu") -> GPU:
    key = gpu_id.strip().lower()
    if key in GPUS:
        return GPUS[key]
    close = difflib.get_close_matches(key, GPUS, n=3, cutoff=0.3)
    hint = f"did you mean {', '.join(close)}? " if close else ""
    whole = [g.id for g in GPUS.values() if g.parent is None]
    slices = "; MIG slices as <gpu>-mig-<profile>, e.g. h100-sxm-mig-3g.40gb (tokenfleet gpus)"
    raise PlanError(field, gpu_id, "unknown GPU type", f"{hint}known: {', '.join(whole)}{slices}")
