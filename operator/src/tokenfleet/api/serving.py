"""spec.serving: aggregated, disaggregated prefill / decode, or the planner's choice.

Disaggregated serving runs two engine workloads per LLMService, a prefill role and a decode
role, and moves each request's KV cache between them (vLLM's NixlConnector, SGLang's NIXL or
Mooncake backend). The planner sizes both roles and says which kind is cheaper per good
request (capacity/disagg); `auto` takes the cheaper. Requests reach the roles through the
endpoint picker's disaggregation profile, so disaggregated serving needs spec.routing.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from tokenfleet.api.base import Rule, SpecModel, check, section
from tokenfleet.capacity.engine_profiles import engine_facts

# P/D without the picker has no path that sends a request to a prefill pod first.
DISAGGREGATED_NEEDS_ROUTING = Rule(
    "!has(self.serving) || self.serving.mode == 'aggregated'"
    " || (has(self.routing) && self.routing.enabled)",
    "spec.serving.mode disaggregated or auto needs spec.routing.enabled: true (the endpoint "
    "picker's disaggregation profile sends each request to a prefill pod, then a decode pod)",
    "set spec.routing.enabled: true, or set spec.serving.mode: aggregated",
)
MOONCAKE_IS_SGLANG = Rule(
    "!has(self.serving) || self.serving.transferBackend == 'nixl'"
    " || (has(self.engine) && self.engine.kind == 'sglang')",
    "spec.serving.transferBackend mooncake is an SGLang backend; vLLM moves KV with NixlConnector",
    "set spec.serving.transferBackend: nixl, or spec.engine.kind: sglang",
)
ROLES_NEED_DISAGGREGATION = Rule(
    "!has(self.serving) || self.serving.mode != 'aggregated'"
    " || (!has(self.serving.prefill.tensorParallelSize)"
    " && !has(self.serving.decode.tensorParallelSize) && !has(self.serving.prefillReplicas))",
    "spec.serving.prefill / decode / prefillReplicas apply to disaggregated serving, and "
    "spec.serving.mode is aggregated",
    "set spec.serving.mode: disaggregated or auto, or remove the role settings",
)
SERVING_RULES = (DISAGGREGATED_NEEDS_ROUTING, MOONCAKE_IS_SGLANG, ROLES_NEED_DISAGGREGATION)


class RoleSpec(SpecModel):
    """One role's layout; unset fields are planned."""

    tensor_parallel_size: int | None = Field(default=None, ge=1, le=64)
    """Tensor parallel size of this role's replicas. Default: planned (the cheapest pair
    the KV connector accepts)."""


class ServingSpec(SpecModel):
    """How prefill and decode are placed."""

    mode: Literal["aggregated", "disaggregated", "auto"] = "aggregated"
    """aggregated: each replica runs prefill and decode; disaggregated: a prefill role and a
    decode role joined by a KV transfer; auto: whichever the planner finds cheaper per good
    request (status.plan.serving says which, by how much and why)."""
    kv_link: Literal["network", "nvlink"] = "network"
    """The link a request's KV crosses: network (the roles' pods on any nodes; the node NIC)
    or nvlink (the planner assumes both roles on one node)."""
    network_gbps: float | None = Field(default=None, gt=0, le=10_000)
    """The node network's speed per GPU, Gb/s (e.g. 400 RDMA, 100 TCP). Default: the GPU
    catalog's."""
    transfer_backend: Literal["nixl", "mooncake"] = "nixl"
    """SGLang's --disaggregation-transfer-backend; vLLM always uses NixlConnector."""
    prefill_replicas: int | None = Field(default=None, ge=0, le=1000)
    """Prefill replicas. Default: the planner's ratio of prefill to decode replicas at their
    goodput, applied to spec.replicas (the decode replicas, which kubectl scale and the
    scale subresource act on)."""
    prefill: RoleSpec = section(RoleSpec)
    """The prefill role."""
    decode: RoleSpec = section(RoleSpec)
    """The decode role."""


def check_serving(serving: ServingSpec, routing_enabled: bool, engine: str) -> None:
    """SERVING_RULES in Python, with the same messages (api/base.py Rule)."""
    check(
        DISAGGREGATED_NEEDS_ROUTING,
        serving.mode == "aggregated" or routing_enabled,
        f"mode={serving.mode}, routing.enabled={routing_enabled}",
    )
    check(
        MOONCAKE_IS_SGLANG,
        serving.transfer_backend in engine_facts(engine).transfer_backends,
        f"transferBackend={serving.transfer_backend}, engine.kind={engine}",
    )
    roles_set = (
        serving.prefill.tensor_parallel_size is not None
        or serving.decode.tensor_parallel_size is not None
        or serving.prefill_replicas is not None
    )
    aggregated = serving.mode == "aggregated"
    check(ROLES_NEED_DISAGGREGATION, not aggregated or not roles_set, "mode=aggregated")
