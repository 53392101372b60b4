"""Names, labels and annotations shared by every manifest of one LLMService."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from tokenfleet.api import LLMService
from tokenfleet.capacity.types import Plan
from tokenfleet.engines.types import ServingRole

Manifest = dict[str, Any]

ENGINE_CONTAINER = "engine"
SERVICE_PORT = 80  # clients call http://<llmservice>.<namespace>.svc/v1
PORT_NAME = "http"
CACHE_MOUNT = "/model-cache"  # Hugging Face downloads (and vLLM's compile cache) land here

LLMSERVICE_LABEL = "tokenfleet.dev/llmservice"
# server: a single-node replica's pod; leader / worker: the pods of a multi-node replica.
# Only servers and leaders answer HTTP, so the Service and the PodMonitor select those.
ROLE_LABEL = "tokenfleet.dev/role"
HTTP_ROLES = ("server", "leader")
# Disaggregated serving: the role a workload's pods run. Ours selects each role's workload;
# llm-d's is what the endpoint picker's prefill-filter / decode-filter read
# (llm-d-router@v0.10.0:pkg/epp/framework/plugins/scheduling/filter/bylabel/roles.go).
SERVING_ROLE_LABEL = "tokenfleet.dev/serving-role"
LLMD_ROLE_LABEL = "llm-d.ai/role"


# spec.gpu.type auto: each GPU type's replicas are their own workload, its pods labelled
# with the type (the controller counts them per type; the Service and pool select them all).
GPU_TYPE_LABEL = "tokenfleet.dev/gpu-type"


@dataclass(frozen=True)
class Place:
    """Where and how many: the placement provider's labels (capacity/placement.py; None:
    the operator's default), and for one GPU type of a spec.gpu.type auto fleet, its
    replicas (`typed`: the workload is that type's own)."""

    placement: str | None = None
    replicas: int | None = None  # None: spec.replicas
    typed: bool = False


ANYWHERE = Place()  # the process's placement, spec.replicas, the LLMService's own workload


@dataclass(frozen=True)
class RoleRender:
    """One role's workload of a disaggregated LLMService: its engine role and replicas."""

    serving: ServingRole
    replicas: int

    @property
    def name(self) -> str:
        return self.serving.role


def labels(service: LLMService) -> dict[str, str]:
    """The labels DESIGN.md puts on everything tokenfleet creates."""
    return {
        "app.kubernetes.io/name": "tokenfleet-engine",
        "app.kubernetes.io/instance": service.name,
        "app.kubernetes.io/managed-by": "tokenfleet",
        LLMSERVICE_LABEL: service.name,
    }


def selector(service: LLMService) -> dict[str, str]:
    """matchLabels of the engine pods. Deployment selectors are immutable: never change it."""
    return {LLMSERVICE_LABEL: service.name}


def metadata(service: LLMService, name: str | None = None) -> dict[str, Any]:
    return {"name": name or service.name, "namespace": service.namespace, "labels": labels(service)}


def role_selector(
    service: LLMService, role: RoleRender | None, gpu_type: str | None = None
) -> dict[str, str]:
    """matchLabels of one workload's pods: the LLMService's, a disaggregated role's, and a
    GPU type's (spec.gpu.type auto)."""
    out = selector(service)
    if role is not None:
        out[SERVING_ROLE_LABEL] = role.name
    if gpu_type is not None:
        out[GPU_TYPE_LABEL] = gpu_type
    return out


def workload_name(
    service: LLMService, plan: Plan, role: RoleRender | None = None, typed: bool = False
) -> str:
    """Deployment: the LLMService's name (`<name>-prefill` / `<name>-decode` for a role of
    disaggregated serving; `<name>-<gpu type>` for one type of spec.gpu.type auto, dots as
    dashes). LeaderWorkerSet: that name + `-lws`, because the LWS controller creates a
    headless Service named after the LWS (for its pods' DNS, so a DNS label), and the
    client-facing Service already has the LLMService's name."""
    base = service.name if role is None else f"{service.name}-{role.name}"
    if typed:
        base = f"{base}-{type_suffix(plan.gpu.id)}"
    return base if plan.nodes_per_replica <= 1 else f"{base}-lws"


def type_suffix(gpu_id: str) -> str:
    return gpu_id.replace(".", "-")


def plan_annotations(plan: Plan) -> dict[str, str]:
    """The plan a workload was rendered from, for `kubectl describe` readers. On the workload
    only, never on the pod template: a re-worded prediction must not restart GPU pods."""
    summary = {
        "engine": f"{plan.engine} {plan.engine_version}",
        "gpu": plan.gpu.id,
        "tensorParallelSize": plan.tensor_parallel_size,
        "pipelineParallelSize": plan.pipeline_parallel_size,
        "gpusPerReplica": plan.gpus_per_replica,
        "nodesPerReplica": plan.nodes_per_replica,
        "maxModelLen": plan.max_model_len,
        "kvCacheTokens": plan.kv_cache_tokens,
        "maxConcurrency": round(plan.max_concurrency, 2),
        "predictedTtftMs": round(plan.predicted.ttft_ms, 1),
        "predictedTpotMs": round(plan.predicted.tpot_ms, 2),
        "goodputRequestsPerSecond": round(plan.predicted.goodput_requests_per_second, 3),
    }
    return {
        "tokenfleet.dev/plan": json.dumps(summary, separators=(",", ":")),
        "tokenfleet.dev/plan-reason": plan.reason,
    }
