"""The engine workload: a Deployment when one node holds a replica, a LeaderWorkerSet
(leaderworkerset.x-k8s.io/v1) when a replica spans nodes."""

from __future__ import annotations

from typing import Any

from tokenfleet.api import LLMService
from tokenfleet.capacity.types import Plan
from tokenfleet.engines.images import DEFAULT_IMAGES, ImageTable
from tokenfleet.render import role_pod, timing
from tokenfleet.render.meta import (
    ANYWHERE,
    GPU_TYPE_LABEL,
    Place,
    RoleRender,
    metadata,
    plan_annotations,
    role_selector,
    workload_name,
)
from tokenfleet.render.pod import Role, pod_template

LWS_API_VERSION = "leaderworkerset.x-k8s.io/v1"


def _meta(service: LLMService, plan: Plan, role: RoleRender | None, place: Place) -> dict[str, Any]:
    meta = metadata(service, workload_name(service, plan, role, place.typed))
    if place.typed:
        meta["labels"][GPU_TYPE_LABEL] = plan.gpu.id
    meta["annotations"] = plan_annotations(plan)
    return meta


def _template(
    service: LLMService,
    plan: Plan,
    node: Role,
    images: ImageTable,
    role: RoleRender | None,
    place: Place,
) -> dict[str, Any]:
    if role is None:
        return pod_template(service, plan, node, images, place=place)
    return role_pod.decorate(
        pod_template(service, plan, node, images, role.serving, place),
        service,
        plan,
        node,
        role,
        images,
    )


def _replicas(service: LLMService, role: RoleRender | None, place: Place) -> int:
    if role is not None:
        return role.replicas
    return service.spec.replicas if place.replicas is None else place.replicas


def _selector(
    service: LLMService, plan: Plan, role: RoleRender | None, place: Place
) -> dict[str, str]:
    return role_selector(service, role, plan.gpu.id if place.typed else None)


def deployment(
    service: LLMService,
    plan: Plan,
    images: ImageTable = DEFAULT_IMAGES,
    role: RoleRender | None = None,
    place: Place = ANYWHERE,
) -> dict[str, Any]:
    """`role`: one role's workload of disaggregated serving (its own name, pods, replicas)."""
    rollout = service.spec.rollout
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": _meta(service, plan, role, place),
        "spec": {
            "replicas": _replicas(service, role, place),
            "selector": {"matchLabels": _selector(service, plan, role, place)},
            # Default maxSurge 0: an update replaces pods in place and needs no spare GPUs.
            "strategy": {
                "type": "RollingUpdate",
                "rollingUpdate": {
                    "maxSurge": rollout.max_surge,
                    "maxUnavailable": rollout.max_unavailable,
                },
            },
            # A pod that is still loading weights is progress, not a stuck rollout.
            "progressDeadlineSeconds": timing.startup_seconds(plan) + 600,
            "revisionHistoryLimit": 3,
            "template": _template(service, plan, "server", images, role, place),
        },
    }


def leader_worker_set(
    service: LLMService,
    plan: Plan,
    images: ImageTable = DEFAULT_IMAGES,
    role: RoleRender | None = None,
    place: Place = ANYWHERE,
) -> dict[str, Any]:
    """One group of `nodes_per_replica` pods per replica: the leader (node rank 0) serves
    the API, workers hold the other ranks. A failed pod restarts its whole group, since a
    replica with a missing rank cannot serve."""
    rollout = service.spec.rollout
    return {
        "apiVersion": LWS_API_VERSION,
        "kind": "LeaderWorkerSet",
        "metadata": _meta(service, plan, role, place),
        "spec": {
            "replicas": _replicas(service, role, place),
            "startupPolicy": "LeaderCreated",
            "rolloutStrategy": {
                "type": "RollingUpdate",
                "rollingUpdateConfiguration": {
                    "maxSurge": rollout.max_surge,
                    "maxUnavailable": rollout.max_unavailable,
                },
            },
            "leaderWorkerTemplate": {
                "size": plan.nodes_per_replica,
                "restartPolicy": "RecreateGroupOnPodRestart",
                "leaderTemplate": _template(service, plan, "leader", images, role, place),
                "workerTemplate": _template(service, plan, "worker", images, role, place),
            },
        },
    }


def workload(
    service: LLMService,
    plan: Plan,
    images: ImageTable = DEFAULT_IMAGES,
    role: RoleRender | None = None,
    place: Place = ANYWHERE,
) -> dict[str, Any]:
    if plan.nodes_per_replica > 1:
        return leader_worker_set(service, plan, images, role, place)
    return deployment(service, plan, images, role, place)
