"""The PodMonitor (Prometheus Operator, monitoring.coreos.com/v1) that scrapes the engines.

Relabelings put `llmservice` and `namespace` on every series, so the autoscaler's PromQL
selects one LLMService's pods by label no matter how the engine names its model.
"""

from __future__ import annotations

from typing import Any

from tokenfleet.api import LLMService
from tokenfleet.capacity.types import Plan
from tokenfleet.engines import engine_info
from tokenfleet.render.meta import (
    HTTP_ROLES,
    PORT_NAME,
    ROLE_LABEL,
    SERVING_ROLE_LABEL,
    metadata,
    selector,
)

SCRAPE_INTERVAL = "15s"


def service_relabelings(service: LLMService) -> list[dict[str, Any]]:
    """The `llmservice` and `namespace` labels every scrape of the service's pods carries."""
    return [
        {"action": "replace", "targetLabel": "llmservice", "replacement": service.name},
        {
            "action": "replace",
            "sourceLabels": ["__meta_kubernetes_namespace"],
            "targetLabel": "namespace",
        },
    ]


def _role_relabeling(plan: Plan) -> list[dict[str, Any]]:
    """Disaggregated serving: every series carries `role` (prefill or decode), so the
    autoscaler reads each pool's signals apart."""
    if plan.serving is None or plan.serving.roles is None:
        return []
    source = "__meta_kubernetes_pod_label_" + "".join(
        c if c.isalnum() else "_" for c in SERVING_ROLE_LABEL
    )
    return [{"action": "replace", "sourceLabels": [source], "targetLabel": "role"}]


def pod_monitor(service: LLMService, plan: Plan) -> dict[str, Any]:
    info = engine_info(plan.engine)
    return {
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "PodMonitor",
        "metadata": metadata(service),
        "spec": {
            "selector": {
                "matchLabels": selector(service),
                # Only pods with an HTTP server have /metrics (not multi-node workers).
                "matchExpressions": [
                    {"key": ROLE_LABEL, "operator": "In", "values": list(HTTP_ROLES)}
                ],
            },
            "podMetricsEndpoints": [
                {
                    "port": PORT_NAME,
                    "path": info.metrics_path,
                    "interval": SCRAPE_INTERVAL,
                    "relabelings": [
                        *service_relabelings(service),
                        {
                            "action": "replace",
                            "sourceLabels": ["__meta_kubernetes_pod_name"],
                            "targetLabel": "pod",
                        },
                        *_role_relabeling(plan),
                    ],
                }
            ],
        },
    }
