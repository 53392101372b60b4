"""Whether the cluster can take an LLMService's spec.routing, and the Routing condition.

The InferencePool CRD (and for spec.routing.gateway the Gateway API's HTTPRoute) is the
cluster's to install, with the Gateway implementation that reads it. When it is missing the
operator does not fail the reconcile and creates none of the routing objects (a picker
without its pool would be half a router): the engines and their plain Service are applied
as without routing, and the Routing condition says what to install. Scale to zero waits
for it too (controller.autoscaler keeps one replica while Routing is not True).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from tokenfleet.api import LLMService
from tokenfleet.api.spec import LLMServiceSpec
from tokenfleet.controller import status as st
from tokenfleet.controller.kube import KubeClient

POOL_API, POOL_PLURAL = "inference.networking.k8s.io/v1", "inferencepools"
ROUTE_API, ROUTE_PLURAL = "gateway.networking.k8s.io/v1", "httproutes"
POOL_INSTALL = (
    "install the Gateway API Inference Extension CRDs (kubectl apply -f https://github.com/"
    "kubernetes-sigs/gateway-api-inference-extension/releases/download/v1.6.0/manifests.yaml)"
    " and a Gateway that implements it"
)
ROUTE_INSTALL = (
    "install the Gateway API CRDs (kubectl apply --server-side -f https://github.com/"
    "kubernetes-sigs/gateway-api/releases/download/v1.6.1/standard-install.yaml)"
)


# The kinds only routing renders. The operator's right to write them is granted per
# namespace (the chart's routing Roles), so they are listed for pruning only where this
# LLMService has routing now or had it applied.
ROUTING_ONLY = ("InferencePool", "HTTPRoute", "RoleBinding", "ServiceAccount")


@dataclass(frozen=True)
class RoutingState:
    available: bool  # render the routing objects
    condition: st.Condition
    # apiVersion or kind -> listed for pruning (ownership.prune)
    served: dict[str, bool] = field(default_factory=dict)


def had_routing(status: Mapping[str, Any]) -> bool:
    """The last status says the routing objects were applied."""
    routing = next((c for c in status.get("conditions") or [] if c.get("type") == "Routing"), None)
    return routing is not None and routing.get("status") == "True"


async def routing_state(
    kube: KubeClient, service: LLMService, status: Mapping[str, Any] | None = None
) -> RoutingState:
    routing = service.spec.routing
    pool = await kube.has_resource(POOL_API, POOL_PLURAL)
    route = await kube.has_resource(ROUTE_API, ROUTE_PLURAL)
    touched = routing.enabled or had_routing(status or {})
    served = {POOL_API: pool, ROUTE_API: route, **dict.fromkeys(ROUTING_ONLY, touched)}
    if not routing.enabled:
        condition = st.Condition("Routing", False, "Disabled", "spec.routing.enabled is false")
        return RoutingState(False, condition, served)
    if not pool:
        message = (
            f"spec.routing.enabled: the InferencePool API ({POOL_API}) is not served, so "
            f"traffic goes through the plain Service and replicas stay at 1 or more: "
            f"{POOL_INSTALL}"
        )
        return RoutingState(
            False, st.Condition("Routing", False, "InferencePoolMissing", message), served
        )
    if routing.gateway is not None and not route:
        message = (
            f"spec.routing.gateway: the HTTPRoute API ({ROUTE_API}) is not served, so no "
            f"routing object is created: {ROUTE_INSTALL}, or remove spec.routing.gateway"
        )
        return RoutingState(
            False, st.Condition("Routing", False, "HTTPRouteMissing", message), served
        )
    message = f"InferencePool {service.name} with endpoint picker {service.name}-epp"
    return RoutingState(True, st.Condition("Routing", True, "PoolApplied", message), served)


def zero_floor(spec: LLMServiceSpec, status: Mapping[str, Any]) -> int:
    """The autoscaler's minReplicas: 0 only while the Routing condition is True (a picker
    holds requests); otherwise at least 1, whatever the spec asks."""
    routing = next((c for c in status.get("conditions") or [] if c.get("type") == "Routing"), None)
    active = routing is not None and routing.get("status") == "True"
    floor = int(spec.autoscaling.min_replicas)
    return floor if active else max(1, floor)
