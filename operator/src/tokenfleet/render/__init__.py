"""(LLMService, Plan) -> the Kubernetes manifests that run it, as plain dicts. Pure.

`all(service, plan, *, monitoring_available=True, lws_available=True)` is the single entry
point, used by the controller and by `tokenfleet render`. It returns, in apply order:
- PersistentVolumeClaim `<name>-model-cache` when spec.storage is set;
- Deployment `<name>` (one node per replica) or LeaderWorkerSet `<name>-lws` (several);
- Service `<name>` (port 80 named http -> the engine's port, leaders / servers only);
- PodDisruptionBudget `<name>`;
- PodMonitor `<name>` when the Prometheus Operator's API exists.

Manifests carry namespace and labels but no ownerReferences: the controller adds those
(controller.reconcile.own) since only it knows the LLMService's uid. A plan that needs
several nodes per replica while LeaderWorkerSet is not installed raises RenderError (a
PlanError) with the install hint, instead of rendering a workload that cannot run.
"""

from __future__ import annotations

from typing import Any

from tokenfleet.api import LLMService
from tokenfleet.capacity.errors import PlanError
from tokenfleet.capacity.types import Plan
from tokenfleet.render.disruption import pod_disruption_budget
from tokenfleet.render.meta import ENGINE_CONTAINER, SERVICE_PORT, labels, selector, workload_name
from tokenfleet.render.monitoring import pod_monitor
from tokenfleet.render.service import endpoint_url, service
from tokenfleet.render.storage import model_cache_claim
from tokenfleet.render.workload import deployment, leader_worker_set, workload

__all__ = [
    "ENGINE_CONTAINER",
    "SERVICE_PORT",
    "RenderError",
    "all",
    "deployment",
    "endpoint_url",
    "labels",
    "leader_worker_set",
    "model_cache_claim",
    "pod_disruption_budget",
    "pod_monitor",
    "selector",
    "service",
    "workload",
    "workload_name",
]

LWS_INSTALL = (
    "install LeaderWorkerSet (kubectl apply --server-side -f "
    "https://github.com/kubernetes-sigs/lws/releases/latest/download/manifests.yaml)"
)


class RenderError(PlanError):
    """The plan cannot be rendered for this cluster (names the field and the fix)."""


def all(
    llmservice: LLMService,
    plan: Plan,
    *,
    monitoring_available: bool = True,
    lws_available: bool = True,
) -> list[dict[str, Any]]:
    if plan.nodes_per_replica > 1 and not lws_available:
        raise RenderError(
            "spec.gpu",
            f"{plan.gpus_per_replica} x {plan.gpu.id}",
            f"a replica needs {plan.nodes_per_replica} nodes, which runs as a LeaderWorkerSet, "
            "and the cluster has no LeaderWorkerSet API",
            f"{LWS_INSTALL}, or pick a larger GPU type so a replica fits one node",
        )
    manifests: list[dict[str, Any]] = []
    claim = model_cache_claim(llmservice)
    if claim is not None:
        manifests.append(claim)
    manifests.append(workload(llmservice, plan))
    manifests.append(service(llmservice, plan))
    manifests.append(pod_disruption_budget(llmservice, plan))
    if monitoring_available:
        manifests.append(pod_monitor(llmservice, plan))
    return manifests
