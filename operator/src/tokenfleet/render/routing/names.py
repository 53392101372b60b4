"""Names and labels of the routing objects of one LLMService."""

from __future__ import annotations

from typing import Any

from tokenfleet.api import LLMService
from tokenfleet.render.meta import labels

PICKER_SUFFIX = "-epp"
PICKER_LABEL = "tokenfleet.dev/endpoint-picker"


def picker_name(service: LLMService) -> str:
    """`<name>-epp`: the picker's Deployment, Service, ConfigMap, ServiceAccount, Role."""
    return f"{service.name}{PICKER_SUFFIX}"


def picker_selector(service: LLMService) -> dict[str, str]:
    """The picker's pods. Never tokenfleet.dev/llmservice: the engines' Service, PodMonitor,
    InferencePool and autoscaler select engine pods by that label."""
    return {PICKER_LABEL: service.name}


def picker_labels(service: LLMService) -> dict[str, str]:
    return {
        **labels(service),
        "app.kubernetes.io/name": "tokenfleet-endpoint-picker",
        "app.kubernetes.io/component": "endpoint-picker",
    }


def picker_pod_labels(service: LLMService) -> dict[str, str]:
    pod = {k: v for k, v in picker_labels(service).items() if k != "tokenfleet.dev/llmservice"}
    return {**pod, **picker_selector(service)}


def picker_metadata(service: LLMService) -> dict[str, Any]:
    return {
        "name": picker_name(service),
        "namespace": service.namespace,
        "labels": picker_labels(service),
    }
