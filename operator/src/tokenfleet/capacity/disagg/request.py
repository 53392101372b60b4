"""What a plan request says about serving: aggregated, disaggregated, or the planner's choice."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from tokenfleet.capacity.disagg.link import LinkKind

ServingMode = Literal["aggregated", "disaggregated", "auto"]
SERVING_MODES: tuple[ServingMode, ...] = ("aggregated", "disaggregated", "auto")
TransferBackend = Literal["nixl", "mooncake"]


@dataclass(frozen=True)
class ServingRequest:
    """`mode`: aggregated (one role, the default), disaggregated (a prefill and a decode
    role), or auto (the cheaper per good request). The rest applies to disaggregated plans:
    the KV link between the roles' pods and its speed, fixed TP sizes per role (None: the
    planner's), and SGLang's transfer backend (vLLM always uses NixlConnector)."""

    mode: ServingMode = "aggregated"
    link: LinkKind = "network"
    network_gbit: float | None = None  # Gb/s per GPU; None: the GPU catalog's NIC
    prefill_tp: int | None = None
    decode_tp: int | None = None
    backend: TransferBackend = "nixl"
