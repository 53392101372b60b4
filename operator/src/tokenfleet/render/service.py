"""The client-facing Service: stable name (the LLMService's), OpenAI API on port 80."""

from __future__ import annotations

from typing import Any

from tokenfleet.api import LLMService
from tokenfleet.capacity.types import Plan
from tokenfleet.render.meta import (
    PORT_NAME,
    ROLE_LABEL,
    SERVICE_PORT,
    SERVING_ROLE_LABEL,
    metadata,
    selector,
)


def endpoint_url(service: LLMService) -> str:
    """The OpenAI base URL clients inside the cluster use."""
    return f"http://{service.name}.{service.namespace}.svc.cluster.local:{SERVICE_PORT}/v1"


def service(svc: LLMService, plan: Plan) -> dict[str, Any]:
    pods = selector(svc)
    if plan.nodes_per_replica > 1:
        pods[ROLE_LABEL] = "leader"  # workers of a multi-node replica serve no HTTP
    if plan.serving is not None and plan.serving.roles is not None:
        # Disaggregated: the decode pods, whose routing sidecar serves a request whole (a
        # request that did not come through the picker is prefilled there).
        pods[SERVING_ROLE_LABEL] = "decode"
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": metadata(svc),
        "spec": {
            "type": "ClusterIP",
            "selector": pods,
            "ports": [
                {
                    "name": PORT_NAME,
                    "port": SERVICE_PORT,
                    "targetPort": PORT_NAME,
                    "protocol": "TCP",
                    "appProtocol": "http",
                }
            ],
        },
    }
