"""Communication that costs bandwidth: all-reduce and pipeline hand-off, per interconnect.

Tensor parallelism does two all-reduces per layer (after attention and after the MLP), each of
tokens x hidden x activation bytes. Each takes the faster of two paths:
- on NVLink nodes, below 8 MiB: the engines' own one-shot "custom" all-reduce over CUDA IPC
  (vLLM's and SGLang's default), a low fixed latency but only ~50 GB/s of bus bandwidth;
- NCCL's ring: latency = base + 2 (n-1) ring steps x a per-step latency, bandwidth term
  2 (n-1)/n x bytes / achieved bus bandwidth, in the protocol NCCL picks (LL: low latency, a
  quarter of the bandwidth; Simple: the link's bandwidth after a higher latency). A ring
  across nodes crosses the network 2 x nodes times and runs at the NIC's bandwidth.
Decode messages (a few hundred tokens x hidden) fall on the one-shot path, whose bandwidth, not
only its latency, is what a 70B model's 160 all-reduces per step cost. Prefill chunks (thousands
of tokens) take the Simple ring; on PCIe GPUs without NVLink it is the ring's bandwidth term
that dominates prefill, while decode pays mostly latency.
A pipeline hand-off sends tokens x hidden x bytes once per stage boundary.

Every constant names its source. Bandwidths are the catalog's per-GPU, per-direction link
numbers (capacity/gpus.py) times the share NCCL / RCCL reach; with no public all-reduce data
for L4 / A10G / L40S servers in perf-data.md, PCIe is modelled from first principles (no P2P
through NVLink: the ring runs through the PCIe root complex) and says so.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from tokenfleet.capacity.gpus import GPU

_NCCL_TUNING = "NCCL src/graph/tuning.cc (ring latency per step, by protocol)"


@dataclass(frozen=True)
class Link:
    """NCCL ring all-reduce over one kind of link."""

    efficiency: float  # achieved bus bandwidth / catalog link bandwidth (large messages)
    simple_step_s: float  # per ring step, Simple protocol (large messages)
    ll_step_s: float  # per ring step, LL protocol (small messages)
    source: str


@dataclass(frozen=True)
class OneShot:
    """The engines' custom all-reduce for small messages (CUDA IPC over NVLink)."""

    latency_s: float
    bus_gbps: float  # bus bandwidth it reaches at 256 KiB - 1 MiB
    max_bytes: float  # engines fall back to NCCL above this
    source: str


# NCCL's ring protocols: Simple reaches the link's bandwidth after a higher fixed latency; LL
# (8-byte stores carrying 4 bytes of data and a flag) has the lowest latency and a quarter of
# the bus bandwidth for an all-reduce. NCCL picks per message by this same model.
SIMPLE_BASE_S, LL_BASE_S, LL_BANDWIDTH_SHARE = 8.4e-6, 6.6e-6, 0.25
Protocol = Literal["simple", "ll"]

LINKS: dict[str, Link] = {
    "NVLink 3": Link(
        0.77, 3.4e-6, 0.6e-6, "NCCL all_reduce_perf on DGX A100: ~230 of 300 GB/s; " + _NCCL_TUNING
    ),
    "NVLink 4": Link(
        0.80,
        3.4e-6,
        0.6e-6,
        "NCCL ring on DGX H100: ~370 of 450 GB/s (nccl-tests#212); " + _NCCL_TUNING,
    ),
    "NVLink 5": Link(0.80, 3.4e-6, 0.6e-6, "prior: as NVLink 4 (NVSwitch generation)"),
    "PCIe Gen4": Link(
        0.70,
        5.7e-6,
        1.0e-6,
        "first principles: x16 Gen4 32 GB/s raw, ring via the root complex; " + _NCCL_TUNING,
    ),
    "PCIe Gen5": Link(0.70, 5.7e-6, 1.0e-6, "first principles: as Gen4 at twice the rate"),
    "Infinity Fabric": Link(
        0.65, 3.4e-6, 0.6e-6, "RCCL on MI300X: ~290 of 448 GB/s; latency prior: as NVLink"
    ),
}
NETWORK = Link(
    0.80,
    14.0e-6,
    2.7e-6,
    "400 Gb/s RDMA NIC per GPU (InfiniBand / RoCE), NCCL ~80%; " + _NCCL_TUNING,
)

# Fitted to the 18 points (TP 2 / 4 / 8 x 512 B - 1 MiB) of vLLM's custom all-reduce on H100
# published in sgl-project/sglang#2904 (eager mode), relative least squares: within 25% of
# each (9.1 / 20.6 / 40.2 us at TP 4 for 512 B / 256 KiB / 1 MiB).
_H100_ONE_SHOT = OneShot(9.0e-6, 49.0, 8 * 2**20, "sglang#2904: vLLM custom AR on H100, 18 pts")
ONE_SHOT: dict[str, OneShot] = {
    "NVLink 4": _H100_ONE_SHOT,
    "NVLink 5": OneShot(9.0e-6, 49.0, 8 * 2**20, "prior: as NVLink 4"),
    # The one-shot kernel reads every peer's buffer over the links: bandwidth scales with them.
    "NVLink 3": OneShot(9.0e-6, 49.0 * 300 / 450, 8 * 2**20, "prior: NVLink 4 x 300/450 GB/s"),
}


def link_of(gpu: GPU) -> Link:
    for name, link in LINKS.items():
        if gpu.interconnect.startswith(name):
            return link
    return LINKS["PCIe Gen4"]  # unknown: assume the slowest in-node link we know


def one_shot_of(gpu: GPU) -> OneShot | None:
    """The custom all-reduce engines use on this GPU's links; None on PCIe (vLLM turns it off
    beyond two PCIe GPUs) and AMD (not modelled)."""
    for name, shot in ONE_SHOT.items():
        if gpu.interconnect.startswith(name):
            return shot
    return None


def ring_seconds(
    nbytes: float,
    ranks: int,
    bandwidth_gbps: float,
    link: Link,
    nodes: int = 1,
    protocol: Protocol = "simple",
) -> float:
    """One NCCL ring all-reduce of `nbytes` over `ranks` GPUs in one protocol. The ring takes
    2 (n-1) steps; across `nodes` nodes, 2 x nodes of them cross the network (NCCL's model),
    whose bandwidth (`bandwidth_gbps`: the NIC's) is then the bottleneck."""
    if ranks <= 1:
        return 0.0
    simple = protocol == "simple"
    steps = 2 * (ranks - 1)
    inter = 2 * nodes if nodes > 1 else 0
    latency = SIMPLE_BASE_S if simple else LL_BASE_S
    latency += (steps - inter) * (link.simple_step_s if simple else link.ll_step_s)
    latency += inter * (NETWORK.simple_step_s if simple else NETWORK.ll_step_s)
    efficiency = NETWORK.efficiency if nodes > 1 else link.efficiency
    bus = bandwidth_gbps * 1e9 * efficiency * (1.0 if simple else LL_BANDWIDTH_SHARE)
    return latency + 2 * (ranks - 1) / ranks * nbytes / bus


def allreduce_seconds(
    nbytes: float, ranks: int, bandwidth_gbps: float, link: Link, nodes: int = 1
) -> float:
    """One NCCL all-reduce: the faster of its LL and Simple rings, as NCCL's tuner picks."""
    return min(
        ring_seconds(nbytes, ranks, bandwidth_gbps, link, nodes, "simple"),
        ring_seconds(nbytes, ranks, bandwidth_gbps, link, nodes, "ll"),
    )


def one_shot_seconds(nbytes: float, ranks: int, shot: OneShot) -> float:
    """One custom (one-shot / two-shot) all-reduce of `nbytes` over `ranks` NVLink GPUs."""
    if ranks <= 1:
        return 0.0
    return shot.latency_s + 2 * (ranks - 1) / ranks * nbytes / (shot.bus_gbps * 1e9)


@dataclass(frozen=True)
class _Affine:
    fixed: float
    per_token: float

    def at(self, tokens: int) -> float:
        return self.fixed + self.per_token * tokens


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
    tp_one_shot: OneShot | None = None  # None: TP across nodes, or no custom all-reduce here
    tp_nodes: int = 1  # nodes a TP group spans (its ring crosses the network 2 x nodes times)

    def _allreduce(self, nbytes: float) -> float:
        shot = self.tp_one_shot
        if shot is None:
            return allreduce_seconds(
                nbytes, self.tp, self.tp_bandwidth_gbps, self.tp_link, self.tp_nodes
            )
        # On NVLink the engine's own kernel replaces NCCL's small-message protocols below its
        # size limit; NCCL's Simple ring is the faster path only past the measured range.
        simple = ring_seconds(nbytes, self.tp, self.tp_bandwidth_gbps, self.tp_link)
        if nbytes > shot.max_bytes:
            return simple
        return min(simple, one_shot_seconds(nbytes, self.tp, shot))

    def tp_seconds(self, tokens: int) -> float:
        if self.tp <= 1 or tokens <= 0:
            return 0.0
        return 2 * self.layers * self._allreduce(tokens * self.hidden * self.act_bytes)

    def pp_seconds(self, tokens: int) -> float:
        if self.pp <= 1 or tokens <= 0:
            return 0.0
        nbytes = tokens * self.hidden * self.act_bytes
        hop = (
            SIMPLE_BASE_S
            + self.pp_link.simple_step_s
            + nbytes / (self.pp_bandwidth_gbps * 1e9 * self.pp_link.efficiency)
        )
        return (self.pp - 1) * hop

    def __post_init__(self) -> None:
        # tp_seconds + pp_seconds is piecewise affine in tokens: the low-latency line (one-shot
        # or NCCL LL) below a switch point, the Simple ring above it. step_seconds calls this
        # thousands of times per plan(), so keep both lines and the switch as plain numbers.
        def line(at: int) -> _Affine:
            a = self.tp_seconds(at) + self.pp_seconds(at)
            b = self.tp_seconds(at + 1) + self.pp_seconds(at + 1)
            return _Affine(a - (b - a) * at, b - a)

        small = line(1)
        large = line(1 << 20)
        switch = 1 << 20  # tokens: past any step an engine runs
        if large.per_token < small.per_token:
            switch = int((large.fixed - small.fixed) / (small.per_token - large.per_token))
        if self.tp_one_shot is not None:
            switch = min(switch, int(self.tp_one_shot.max_bytes / (self.hidden * self.act_bytes)))
        object.__setattr__(self, "_small", small)
        object.__setattr__(self, "_large", large)
        object.__setattr__(self, "_switch", max(switch, 0))

    def lines(self) -> tuple[int, float, float, float, float]:
        """seconds() as plain numbers (switch, small line's fixed and per-token, large
        line's): for StepModel.step_seconds, which inlines it."""
        small, large = self._small, self._large  # type: ignore[attr-defined]
        return self._switch, small.fixed, small.per_token, large.fixed, large.per_token  # type: ignore[attr-defined]

    def seconds(self, tokens: int) -> float:
        if tokens <= 0:
            return 0.0
        if tokens <= self._switch:  # type: ignore[attr-defined]
            return self._small.at(tokens)  # type: ignore[attr-defined,no-any-return]
        return self._large.at(tokens)  # type: ignore[attr-defined,no-any-return]


def comm_for(gpu: GPU, tp: int, pp: int, per_node: int, hidden: int, layers: int) -> Comm:
    """TP inside a node runs on the GPU link; a TP group across nodes is bounded by the network
    (its ring crosses it), and so are PP hops between nodes."""
    link = link_of(gpu)
    tp_nodes = -(-tp // per_node)
    pp_multi_node = tp * pp > per_node
    return Comm(
        tp=tp,
        pp=pp,
        hidden=hidden,
        layers=layers,
        act_bytes=2.0,  # activations stay bf16 under every weight format
        tp_bandwidth_gbps=gpu.internode_gbps if tp_nodes > 1 else gpu.interconnect_gbps,
        tp_link=link,
        pp_bandwidth_gbps=gpu.internode_gbps if pp_multi_node else gpu.interconnect_gbps,
        pp_link=NETWORK if pp_multi_node else link,
        tp_one_shot=None if tp_nodes > 1 else one_shot_of(gpu),
        tp_nodes=tp_nodes,
    )
