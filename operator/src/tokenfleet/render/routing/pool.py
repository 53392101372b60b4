"""The InferencePool over the engine pods, and the optional HTTPRoute to it.

InferencePool: inference.networking.k8s.io/v1, the version kubernetes-sigs/
gateway-api-inference-extension v1.6.0 serves (config/crd/bases/
inference.networking.k8s.io_inferencepools.yaml; test_routing_validate.py checks the
rendered pools against that file): spec.selector.matchLabels (required), spec.targetPorts
(required, the engines' HTTP port by number), spec.endpointPickerRef (Service name + port,
failureMode).
HTTPRoute: gateway.networking.k8s.io/v1 (kubernetes-sigs/gateway-api v1.6.1, config/crd/
standard/gateway.networking.k8s.io_httproutes.yaml): a backendRef of group
inference.networking.k8s.io, kind InferencePool, as the extension's guides write it.
"""

from __future__ import annotations

from typing import Any

from tokenfleet.api import LLMService
from tokenfleet.capacity.types import Plan
from tokenfleet.engines import engine_info
from tokenfleet.render.meta import ROLE_LABEL, metadata, selector
from tokenfleet.render.routing.names import picker_name
from tokenfleet.render.routing.picker import EXT_PROC_PORT

POOL_API = "inference.networking.k8s.io/v1"
ROUTE_API = "gateway.networking.k8s.io/v1"
# Generous for long generations; the Gateway's default (15 s in Envoy) would cut streams.
ROUTE_TIMEOUT = "600s"


def pool_selector(service: LLMService, plan: Plan) -> dict[str, str]:
    """The engine pods that answer HTTP: servers, or the leaders of multi-node replicas."""
    role = "leader" if plan.nodes_per_replica > 1 else "server"
    return {**selector(service), ROLE_LABEL: role}


def inference_pool(service: LLMService, plan: Plan) -> dict[str, Any]:
    return {
        "apiVersion": POOL_API,
        "kind": "InferencePool",
        "metadata": metadata(service),
        "spec": {
            "selector": {"matchLabels": pool_selector(service, plan)},
            "targetPorts": [{"number": engine_info(plan.engine).port}],
            "appProtocol": "http",
            "endpointPickerRef": {
                "group": "",
                "kind": "Service",
                "name": picker_name(service),
                "port": {"number": EXT_PROC_PORT},
                "failureMode": service.spec.routing.failure_mode,
            },
        },
    }


def http_route(service: LLMService) -> dict[str, Any] | None:
    gateway = service.spec.routing.gateway
    if gateway is None:
        return None
    parent: dict[str, Any] = {
        "group": "gateway.networking.k8s.io",
        "kind": "Gateway",
        "name": gateway.name,
    }
    if gateway.namespace:
        parent["namespace"] = gateway.namespace
    if gateway.section_name:
        parent["sectionName"] = gateway.section_name
    return {
        "apiVersion": ROUTE_API,
        "kind": "HTTPRoute",
        "metadata": metadata(service),
        "spec": {
            "parentRefs": [parent],
            "rules": [
                {
                    "matches": [{"path": {"type": "PathPrefix", "value": "/"}}],
                    "backendRefs": [
                        {
                            "group": "inference.networking.k8s.io",
                            "kind": "InferencePool",
                            "name": service.name,
                        }
                    ],
                    "timeouts": {"request": ROUTE_TIMEOUT},
                }
            ],
        },
    }
