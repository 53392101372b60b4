"""spec.routing -> the Gateway API Inference Extension objects of one LLMService. Pure.

`manifests(service, plan, images, monitoring_available, picker_role)` returns, in apply
order (the picker's identity before the picker, the picker before the pool that names it):
ServiceAccount `<name>-epp`, RoleBinding `<name>-epp` to the chart's ClusterRole
`picker_role` (and `<name>-epp-leader-election` with several pickers), with disaggregated
serving the routing sidecar's ServiceAccount and RoleBinding `<name>-pd-sidecar`,
Deployment and Service `<name>-epp`, InferencePool `<name>`, HTTPRoute `<name>` (with
spec.routing.gateway) and PodMonitor `<name>-epp` (with the Prometheus Operator). Empty
when routing is off.
"""

from __future__ import annotations

from typing import Any

from tokenfleet.api import LLMService
from tokenfleet.capacity.types import Plan
from tokenfleet.engines.images import DEFAULT_IMAGES, ImageTable
from tokenfleet.errors import UserError
from tokenfleet.render.routing import sidecar
from tokenfleet.render.routing.names import PICKER_SUFFIX, picker_name
from tokenfleet.render.routing.picker import (
    deployment,
    picker_config,
    picker_pod_monitor,
    picker_service,
    scales_to_zero,
)
from tokenfleet.render.routing.pool import POOL_API, ROUTE_API, http_route, inference_pool
from tokenfleet.render.routing.rbac import (
    DEFAULT_PICKER_ROLE,
    LEADER_ELECTION_RULES,
    LEADER_ELECTION_SUFFIX,
    PICKER_RULES,
    role_bindings,
    service_account,
)

__all__ = [
    "DEFAULT_PICKER_ROLE",
    "LEADER_ELECTION_RULES",
    "LEADER_ELECTION_SUFFIX",
    "MAX_NAME",
    "PICKER_RULES",
    "POOL_API",
    "ROUTE_API",
    "manifests",
    "picker_config",
    "picker_name",
    "scales_to_zero",
]

MAX_NAME = 63 - len(PICKER_SUFFIX)  # the picker's Service name is a DNS-1035 label


def manifests(
    service: LLMService,
    plan: Plan,
    images: ImageTable = DEFAULT_IMAGES,
    *,
    monitoring_available: bool = True,
    picker_role: str = DEFAULT_PICKER_ROLE,
) -> list[dict[str, Any]]:
    if not service.spec.routing.enabled:
        return []
    if len(service.name) > MAX_NAME:
        raise UserError(
            "metadata.name",
            service.name,
            f"{len(service.name)} characters leaves no room for the endpoint picker's "
            f"Service {picker_name(service)} (at most {MAX_NAME} with spec.routing)",
            f"use a name of at most {MAX_NAME} characters",
        )
    out = [
        service_account(service),
        *role_bindings(service, picker_role),
    ]
    if plan.serving is not None and plan.serving.roles is not None:
        # Decode pods' routing sidecar: its identity, bound to the picker's read rules.
        out += [sidecar.service_account(service), sidecar.role_binding(service, picker_role)]
    out += [
        deployment(service, plan, images),
        picker_service(service),
        inference_pool(service, plan),
    ]
    route = http_route(service)
    if route is not None:
        out.append(route)
    if monitoring_available:
        out.append(picker_pod_monitor(service))
    return out
