"""A GPU type the built-in catalog lacks, as a GPU catalog overlay entry (camelCase, the
form of the operator's --gpu-catalog file and the chart's gpuCatalog value).

Illustrative figures of a 96 GB PCIe card: the tests check the overlay path (parse, plan,
render, the chart's ConfigMap), not the numbers, which a cluster operator takes from the
vendor's datasheet."""

from __future__ import annotations

NEW_GPU = {
    "name": "NVIDIA RTX PRO 6000 Blackwell Server Edition",
    "memoryGib": 94.97,
    "bandwidthGbps": 1597,
    "bf16Tflops": 503,
    "fp8Tflops": 1007,
    "interconnect": "PCIe Gen5",
    "interconnectGbps": 64,
    "gpusPerNode": 8,
    "nodeLabelValue": "NVIDIA-RTX-PRO-6000-Blackwell-Server-Edition",
    "pricePerHour": 1.9,
}
