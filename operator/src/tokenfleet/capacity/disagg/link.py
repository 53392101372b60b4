"""The KV transfer between a prefill and a decode replica: which link, and how long. Pure.

Disaggregated serving moves each request's KV cache, after its prefill, from the prefill
replica's GPUs to the decode replica's (vLLM's NixlConnector: the decode workers read the
blocks with NIXL over UCX; SGLang's Mooncake or NIXL backends: the prefill side writes
them). Every TP rank moves its own share at once, each over its own link, so the time is
one rank's share over one GPU's link:

    transfer = HANDOFF_S + max(prefill rank's, decode rank's KV bytes per token)
                           x prompt tokens / (link GB/s per GPU x link efficiency)

The larger share counts: with decode TP above prefill TP several decode ranks read from one
prefill rank, whose link carries its whole share; below it, a decode rank reads from several.
A rank that replicates KV heads (TP > KV heads) or holds MLA's latent (never split by TP)
moves what it holds, so the bytes per rank are the memory model's (Plan.kv_bytes_per_token),
summed over that rank's layers (a pipeline stage moves its own layers in parallel).

The link is a fact of where the pods run:
- `network` (the default): the pods may land on different nodes (Kubernetes does not keep a
  prefill and a decode pod together), so the node network: the GPU catalog's NIC bandwidth
  per GPU (`GPU.internode_gbps`, 400 Gb/s RDMA on the catalog's datacenter GPUs) at the
  efficiency NCCL reaches on it (`comm.NETWORK`), or what `--kv-network-gbps` (Gb/s per
  GPU, e.g. 100 for TCP over a 100 GbE NIC) says;
- `nvlink`: both roles on one node (a node's GPUs split between the roles), the GPU link
  (`GPU.interconnect_gbps`) at its all-reduce efficiency (`comm.LINKS`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from tokenfleet.capacity.comm import LINKS, NETWORK
from tokenfleet.capacity.errors import PlanError
from tokenfleet.capacity.gpus import GPU

LinkKind = Literal["network", "nvlink"]
LINK_KINDS: tuple[LinkKind, ...] = ("network", "nvlink")
# A prior, not a fit: per request, the decode side's side-channel notification and the
# routing sidecar's call to the prefill pod before the read starts (one network round trip
# each, plus the NIXL descriptor post): a couple of milliseconds.
HANDOFF_S = 2e-3


@dataclass(frozen=True)
class KvLink:
    """The link a request's KV crosses, per GPU."""

    kind: LinkKind
    gbps: float  # GB/s per GPU, per direction
    efficiency: float  # achieved / nominal, large transfers
    source: str  # where the bandwidth comes from (catalog or flag)

    @property
    def bytes_per_second(self) -> float:
        return self.gbps * 1e9 * self.efficiency

    def label(self) -> str:
        return f"{self.kind} {self.gbps * 8:g} Gb/s per GPU ({self.source})"


def kv_link(gpu: GPU, kind: LinkKind = "network", network_gbit: float | None = None) -> KvLink:
    """The link between a prefill and a decode pod of `gpu` nodes. `network_gbit`
    overrides the catalog's NIC bandwidth (Gb/s per GPU); it has no meaning for nvlink."""
    if kind not in LINK_KINDS:
        raise PlanError("kv-link", kind, "unknown KV link", f"use one of {', '.join(LINK_KINDS)}")
    if kind == "nvlink":
        if network_gbit is not None:
            raise PlanError(
                "kv-network-gbps",
                network_gbit,
                "sets the node network's speed, and --kv-link nvlink keeps the KV on one node",
                "drop --kv-network-gbps, or use --kv-link network",
            )
        link = LINKS.get(gpu.interconnect)
        efficiency = link.efficiency if link is not None else NETWORK.efficiency
        return KvLink("nvlink", gpu.interconnect_gbps, efficiency, f"{gpu.interconnect}, catalog")
    if network_gbit is not None:
        if not network_gbit > 0:
            raise PlanError(
                "kv-network-gbps", network_gbit, "must be positive", "e.g. 100 (100 GbE TCP)"
            )
        return KvLink("network", network_gbit / 8, NETWORK.efficiency, "--kv-network-gbps")
    return KvLink("network", gpu.internode_gbps, NETWORK.efficiency, "catalog NIC per GPU")


def transfer_seconds(
    prompt_tokens: int, prefill_bytes_per_token: int, decode_bytes_per_token: int, link: KvLink
) -> float:
    """Seconds from a prefill's last step to its KV on the decode replica (module docstring)."""
    per_rank = max(prefill_bytes_per_token, decode_bytes_per_token) * max(prompt_tokens, 0)
    return HANDOFF_S + per_rank / link.bytes_per_second
