"""Communication that costs bandwidth: ring all-reduce and pipeline hand-off, per interconnect.

Ring all-reduce of B bytes over n ranks: latency + 2 (n-1)/n x B / bus bandwidth. Tensor
parallelism does two per layer (after attention and after the MLP), each of tokens x hidden x
activation bytes; prefill moves thousands of tokens, so on PCIe GPUs without NVLink it is the
bandwidth term that dominates, while decode (a few hundred tokens at most) pays mostly latency.
A pipeline hand-off sends tokens x hidden x bytes once per stage boundary.

Bandwidths are the catalog's per-GPU, per-direction link numbers (capacity/gpus.py) times the
share NCCL / RCCL reach; with no public all-reduce data for L4 / A10G / L40S servers in
perf-data.md, PCIe is modelled from first principles (no P2P through NVLink: the ring runs
through the PCIe root complex) and says so.
"""

from __future__ import annotations

from dataclasses import dataclass

from tokenfleet.capacity.gpus import GPU


@dataclass(frozen=True)
class Link:
    efficiency: float  # achieved bus bandwidth / catalog link bandwidth
    latency_s: float  # per collective, small message
    source: str


LINKS: dict[str, Link] = {
    "NVLink 3": Link(0.77, 10e-6, "NCCL all_reduce_perf on DGX A100: ~230 of 300 GB/s"),
    "NVLink 4": Link(0.80, 8e-6, "NCCL all_reduce_perf on DGX H100: ~360 of 450 GB/s"),
    "NVLink 5": Link(0.80, 8e-6, "prior: as NVLink 4 (NVSwitch generation)"),
    "PCIe Gen4": Link(
        0.70, 30e-6, "first principles: x16 Gen4 32 GB/s raw, ring via the root complex"
    ),
    "PCIe Gen5": Link(0.70, 25e-6, "first principles: as Gen4 at twice the rate"),
    "Infinity Fabric": Link(0.65, 12e-6, "RCCL on MI300X: ~290 of 448 GB/s"),
}
NETWORK = Link(0.80, 20e-6, "400 Gb/s RDMA NIC per GPU (InfiniBand / RoCE), NCCL ~80%")


def link_of(gpu: GPU) -> Link:
    for name, link in LINKS.items():
        if gpu.interconnect.startswith(name):
            return link
    return LINKS["PCIe Gen4"]  # unknown: assume the slowest in-node link we know


def allreduce_seconds(nbytes: float, ranks: int, bandwidth_gbps: float, link: Link) -> float:
    """One ring all-reduce of `nbytes` over `ranks` GPUs on links of `bandwidth_gbps`."""
    if ranks <= 1:
        return 0.0
    bus = bandwidth_gbps * 1e9 * link.efficiency
    return link.latency_s + 2 * (ranks - 1) / ranks * nbytes / bus


@dataclass(frozen=True)
class Comm:
    """The communication of one replica layout (per engine step)."""

    tp: int
    pp: int
    hidden: int
    layers: int
    act_bytes: float
    tp_bandwidth_gbps: float
    tp_link: Link
    pp_bandwidth_gbps: float
    pp_link: Link

    def tp_seconds(self, tokens: int) -> float:
        if self.tp <= 1 or tokens <= 0:
            return 0.0
        per = allreduce_seconds(
            tokens * self.hidden * self.act_bytes, self.tp, self.tp_bandwidth_gbps, self.tp_link
        )
        return 2 * self.layers * per

    def pp_seconds(self, tokens: int) -> float:
        if self.pp <= 1 or tokens <= 0:
            return 0.0
        nbytes = tokens * self.hidden * self.act_bytes
        hop = self.pp_link.latency_s + nbytes / (
            self.pp_bandwidth_gbps * 1e9 * self.pp_link.efficiency
        )
        return (self.pp - 1) * hop

    def __post_init__(self) -> None:
        # Both terms are affine in tokens: fixed + per_token x tokens for tokens > 0. Kept
        # as two numbers so step_seconds (thousands of calls per plan()) pays one multiply.
        fixed = self.tp_seconds(1) + self.pp_seconds(1)
        per_token = self.tp_seconds(2) + self.pp_seconds(2) - fixed
        object.__setattr__(self, "_fixed", fixed - per_token)
        object.__setattr__(self, "_per_token", per_token)

    def seconds(self, tokens: int) -> float:
        if tokens <= 0:
            return 0.0
        return self._fixed + self._per_token * tokens  # type: ignore[attr-defined,no-any-return]


def comm_for(gpu: GPU, tp: int, pp: int, per_node: int, hidden: int, layers: int) -> Comm:
    """TP inside a node runs on the GPU link; TP across nodes and PP hops between nodes run
    on the network."""
    link = link_of(gpu)
    tp_multi_node = tp > per_node
    pp_multi_node = tp * pp > per_node
    return Comm(
        tp=tp,
        pp=pp,
        hidden=hidden,
        layers=layers,
        act_bytes=2.0,  # activations stay bf16 under every weight format
        tp_bandwidth_gbps=gpu.internode_gbps if tp_multi_node else gpu.interconnect_gbps,
        tp_link=NETWORK if tp_multi_node else link,
        pp_bandwidth_gbps=gpu.internode_gbps if pp_multi_node else gpu.interconnect_gbps,
        pp_link=NETWORK if pp_multi_node else link,
    )
