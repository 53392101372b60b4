"""spec.routing: inference-aware routing through the Gateway API Inference Extension.

On, the operator renders an InferencePool (inference.networking.k8s.io/v1) over the engine
pods and an endpoint picker (llm-d-router's EPP) that scores them by prefix-cache affinity,
queue depth and KV-cache use; a Gateway that implements the extension (Envoy AI Gateway,
Istio, kgateway, GKE, agentgateway) sends each request where the picker says. The picker's
flow control holds requests while the pool has no pods, which is what makes
autoscaling.minReplicas: 0 possible (see autoscale/zero.py).
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from tokenfleet.api.base import Rule, SpecModel

DNS_SUBDOMAIN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
# The Gateway API's own types for a parentRef (kubernetes-sigs/gateway-api v1.6.1,
# apis/v1/shared_types.go: Namespace, SectionName; the HTTPRoute CRD's parentRefs carry
# them, and the API's unit tests check these against the vendored HTTPRoute CRD), so a
# bad value is refused at kubectl apply, not at the HTTPRoute's apply.
GATEWAY_NAMESPACE = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
SECTION_NAME = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"

# autoscaling.minReplicas: 0 with nothing in front of the engines would leave clients
# with connection errors until someone scales up by hand: only the picker holds requests.
ZERO_NEEDS_ROUTING = Rule(
    "self.autoscaling.minReplicas > 0 || (has(self.routing) && self.routing.enabled)",
    "spec.autoscaling.minReplicas: 0 needs spec.routing.enabled: true (only the endpoint "
    "picker holds requests while no engine runs)",
    "set spec.routing.enabled: true, or set spec.autoscaling.minReplicas to 1 or more",
)


class GatewayRef(SpecModel):
    """The Gateway (gateway.networking.k8s.io) an HTTPRoute attaches the pool to."""

    name: str = Field(min_length=1, max_length=253, pattern=DNS_SUBDOMAIN)
    """Gateway name."""
    namespace: str | None = Field(
        default=None, min_length=1, max_length=63, pattern=GATEWAY_NAMESPACE
    )
    """Gateway namespace. Default: the LLMService's (the Gateway must allow routes from it)."""
    section_name: str | None = Field(
        default=None, min_length=1, max_length=253, pattern=SECTION_NAME
    )
    """Listener of the Gateway to attach to. Default: every listener that allows the route."""


class RoutingSpec(SpecModel):
    """Route through an InferencePool and an endpoint picker instead of a plain Service.

    The InferencePool CRD is the cluster's to install (with the Gateway implementation);
    when it is missing the operator serves through the plain Service and says so in the
    Routing condition."""

    enabled: bool = False
    """Render the InferencePool, the endpoint picker and its RBAC."""
    failure_mode: Literal["FailOpen", "FailClose"] = "FailOpen"
    """What the Gateway does when the picker does not answer: FailOpen sends the request to
    any pod of the pool (llm-d's default), FailClose refuses it."""
    picker_replicas: int = Field(default=1, ge=1, le=5)
    """Endpoint picker replicas; more than one run leader-elected (one scores, the others
    wait), as llm-d-router's chart does."""
    gateway: GatewayRef | None = None
    """Render an HTTPRoute from this Gateway to the pool; unset: route it yourself."""
    queue_ttl_seconds: int = Field(default=300, ge=10, le=3600)
    """How long the picker's flow control holds a request while no engine is ready (scale
    from zero: keep it above a cold start and under the client's deadline)."""
