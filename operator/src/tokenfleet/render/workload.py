"""The engine workload: a Deployment when one node holds a replica, a LeaderWorkerSet
(leaderworkerset.x-k8s.io/v1) when a replica spans nodes."""

from __future__ import annotations

from dataclasses import dataclass
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


@dataclass(frozen=True)
class _Target:
    """One workload to render: the whole LLMService's, or one role's of disaggregated serving
    (its own name, pods, replicas), in one GPU type's place of a multi-type fleet."""

    service: LLMService
    plan: Plan
    images: ImageTable
    role: RoleRender | None
    place: Place

    def meta(self) -> dict[str, Any]:
        service, plan, place = self.service, self.plan, self.place
        meta = metadata(service, workload_name(service, plan, self.role, place.typed))
        if place.typed:
            meta["labels"][GPU_TYPE_LABEL] = plan.gpu.id
        meta["annotations"] = plan_annotations(plan)
        return meta

    def template(self, node: Role) -> dict[str, Any]:
        service, plan, role = self.service, self.plan, self.role
        if role is None:
            return pod_template(service, plan, node, self.images, place=self.place)
        return role_pod.decorate(
            pod_template(service, plan, node, self.images, role.serving, self.place),
            service,
            plan,
            node,
            role,
            self.images,
        )

    def replicas(self) -> int:
        if self.role is not None:
            return self.role.replicas
        place = self.place
        return self.service.spec.replicas if place.replicas is None else place.replicas

    def selector(self) -> dict[str, str]:
        typed = self.plan.gpu.id if self.place.typed else None
        return role_selector(self.service, self.role, typed)

    def rolling_update(self) -> dict[str, Any]:
        rollout = self.service.spec.rollout
        return {"maxSurge": rollout.max_surge, "maxUnavailable": rollout.max_unavailable}


def _deployment(t: _Target) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": t.meta(),
        "spec": {
            "replicas": t.replicas(),
            "selector": {"matchLabels": t.selector()},
            # Default maxSurge 0: an update replaces pods in place and needs no spare GPUs.
            "strategy": {"type": "RollingUpdate", "rollingUpdate": t.rolling_update()},
            # A pod that is still loading weights is progress, not a stuck rollout.
            "progressDeadlineSeconds": timing.startup_seconds(t.plan) + 600,
            "revisionHistoryLimit": 3,
            "template": t.template("server"),
        },
    }


def _leader_worker_set(t: _Target) -> dict[str, Any]:
    """One group of `nodes_per_replica` pods per replica: the leader (node rank 0) serves
    the API, workers hold the other ranks. A failed pod restarts its whole group, since a
    replica with a missing rank cannot serve."""
    return {
        "apiVersion": LWS_API_VERSION,
        "kind": "LeaderWorkerSet",
        "metadata": t.meta(),
        "spec": {
            "replicas": t.replicas(),
            "startupPolicy": "LeaderCreated",
            "rolloutStrategy": {
                "type": "RollingUpdate",
                "rollingUpdateConfiguration": t.rolling_update(),
            },
            "leaderWorkerTemplate": {
                "size": t.plan.nodes_per_replica,
                "restartPolicy": "RecreateGroupOnPodRestart",
                "leaderTemplate": t.template("leader"),
                "workerTemplate": t.template("worker"),
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
    """`role`: one role's workload of disaggregated serving (its own name, pods, replicas)."""
    target = _Target(service, plan, images, role, place)
    if plan.nodes_per_replica > 1:
        return _leader_worker_set(target)
    return _deployment(target)
