"""(LLMService, Plan) -> the Kubernetes manifests that run it, as plain dicts. Pure.

`all(service, plan, *, monitoring_available=True, lws_available=True, images=...,
routing_available=True)` is the
single entry point, used by the controller and by `tokenfleet render` (`images`: the engine
image table, engines.images.DEFAULT_IMAGES unless the operator overrides rows). It returns,
in apply order:
- PersistentVolumeClaim `<name>-model-cache` when spec.storage is set;
- Deployment `<name>` (one node per replica) or LeaderWorkerSet `<name>-lws` (several);
- Service `<name>` (port 80 named http -> the engine's port, leaders / servers only);
- PodDisruptionBudget `<name>`;
- PodMonitor `<name>` when the Prometheus Operator's API exists;
- with spec.routing.enabled, the endpoint picker and the InferencePool (render.routing).

Manifests carry namespace and labels but no ownerReferences: the controller adds those
(controller.reconcile.own) since only it knows the LLMService's uid. A plan that needs
several nodes per replica while LeaderWorkerSet is not installed raises RenderError (a
UserError) with the install hint, instead of rendering a workload that cannot run; so does
a metadata.name that cannot name a Service (check_name).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from tokenfleet.api import LLMService
from tokenfleet.capacity.types import Plan
from tokenfleet.engines.images import DEFAULT_IMAGES, ImageTable
from tokenfleet.errors import UserError
from tokenfleet.render import cache_affinity, roles
from tokenfleet.render.disruption import pod_disruption_budget
from tokenfleet.render.meta import (
    ENGINE_CONTAINER,
    SERVICE_PORT,
    Place,
    labels,
    selector,
    type_suffix,
    workload_name,
)
from tokenfleet.render.monitoring import pod_monitor
from tokenfleet.render.routing import DEFAULT_PICKER_ROLE
from tokenfleet.render.routing import manifests as routing_manifests
from tokenfleet.render.service import endpoint_url, service
from tokenfleet.render.simulate import check_simulate
from tokenfleet.render.storage import model_cache_claim
from tokenfleet.render.workload import workload

__all__ = [
    "ENGINE_CONTAINER",
    "SERVICE_PORT",
    "RenderError",
    "all",
    "endpoint_url",
    "labels",
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


class RenderError(UserError):
    """The plan cannot be rendered for this cluster (names the field and the fix)."""


DNS_LABEL = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
# The Service carries the LLMService's name: a DNS-1035 label of at most 63 characters.
# A LeaderWorkerSet `<name>-lws` makes StatefulSets `<name>-lws-<group>` whose pods get a
# `controller-revision-hash: <statefulset>-<10-char hash>` label (at most 63 characters),
# which leaves 44 for the name with up to 999 groups.
MAX_NAME = 63
MAX_NAME_MULTI_NODE = 63 - len("-lws") - len("-999") - 11


# A namespace is a DNS-1123 label: it may start with a digit, unlike a Service's name.
NAMESPACE_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")


def _suggest(name: str) -> str:
    fixed = re.sub(r"[^a-z0-9-]+", "-", name.lower()).strip("-")[:MAX_NAME_MULTI_NODE]
    if not fixed:
        return "llm"
    return fixed if fixed[:1].isalpha() else f"llm-{fixed}"[:MAX_NAME_MULTI_NODE].rstrip("-")


def namespace_problem(namespace: str) -> tuple[str, str] | None:
    """(problem, fix) when `namespace` cannot name a Kubernetes namespace, else None."""
    if NAMESPACE_LABEL.match(namespace) and len(namespace) <= MAX_NAME:
        return None
    fixed = re.sub(r"[^a-z0-9-]+", "-", namespace.lower()).strip("-")[:MAX_NAME].strip("-")
    return (
        "namespaces are DNS-1123 labels (at most 63 lowercase letters, digits and '-', "
        "starting and ending with a letter or digit)",
        f"use e.g. {fixed or 'default'}",
    )


def check_name(
    llmservice: LLMService, plan: Plan, role_suffix: int = 0, typed: bool = False
) -> None:
    """`role_suffix`: the characters a disaggregated role adds to a workload's name
    (`-prefill`), which a LeaderWorkerSet's pod labels must also hold; `typed`: so does a
    GPU type's (`-l40s`, spec.gpu.type auto)."""
    name = llmservice.name
    if typed:
        role_suffix += len(type_suffix(plan.gpu.id)) + 1
    limit = MAX_NAME_MULTI_NODE - role_suffix if plan.nodes_per_replica > 1 else MAX_NAME
    if not name:
        raise RenderError(
            "metadata.name",
            "<missing>",
            "every LLMService needs a name (its Service and workload carry it)",
            f"set metadata.name, e.g. {_suggest(llmservice.spec.model.id.rsplit('/', 1)[-1])}",
        )
    namespace = namespace_problem(llmservice.namespace)
    if namespace is not None:
        raise RenderError("metadata.namespace", llmservice.namespace, *namespace)
    if not DNS_LABEL.match(name):
        raise RenderError(
            "metadata.name",
            name,
            "the Service of an LLMService has its name, and Service names are DNS-1035 "
            "labels (lowercase letters, digits and '-', starting with a letter)",
            f"rename the LLMService, e.g. {_suggest(name)}",
        )
    if len(name) > limit:
        why = "its LeaderWorkerSet's pod labels" if limit < MAX_NAME else "its Service"
        raise RenderError(
            "metadata.name",
            name,
            f"{len(name)} characters is too long for {why} (at most {limit})",
            f"use a name of at most {limit} characters",
        )


def _is_zero(value: int | str) -> bool:
    return str(value).strip().rstrip("%") in ("0", "")


def check_rollout(llmservice: LLMService) -> None:
    """Deployments and LeaderWorkerSets both reject maxSurge 0 with maxUnavailable 0 (an
    update could never make progress); say so before the API server does."""
    rollout = llmservice.spec.rollout
    if _is_zero(rollout.max_surge) and _is_zero(rollout.max_unavailable):
        raise RenderError(
            "spec.rollout.maxUnavailable",
            rollout.max_unavailable,
            "is 0 while maxSurge is 0 too, so an update could never replace a pod",
            "set maxUnavailable: 1 (no spare GPUs needed) or maxSurge: 1 (one spare replica)",
        )


def _check_lws(plan: Plan, lws_available: bool) -> None:
    """A replica over several nodes runs as a LeaderWorkerSet: refuse it where the cluster
    has no such API."""
    if plan.nodes_per_replica > 1 and not lws_available:
        raise RenderError(
            "spec.gpu",
            f"{plan.gpus_per_replica} x {plan.gpu.id}",
            f"a replica needs {plan.nodes_per_replica} nodes, which runs as a "
            "LeaderWorkerSet, and the cluster has no LeaderWorkerSet API",
            f"{LWS_INSTALL}, or pick a larger GPU type so a replica fits one node",
        )


def split_plans(
    plan: Plan, split: Mapping[str, int] | None, replicas: int
) -> list[tuple[Plan, int]]:
    """(plan, replicas) per GPU type of the workloads to render: a fixed type's one, or for
    spec.gpu.type auto each type of `split` (GPU id -> replicas, the fallback's placement;
    default: every replica on the chosen type), planned for that type (Plan.choice)."""
    if plan.choice is None:
        return [(plan, replicas)]
    out = []
    for gpu_id, count in (split or {plan.gpu.id: replicas}).items():
        typed = plan if gpu_id == plan.gpu.id else plan.choice.plan_for(gpu_id)
        if typed is None:
            raise RenderError(
                "status.gpu.placement",
                gpu_id,
                "is not a usable candidate of this generation's plan",
                "nothing to do: the operator re-places the replicas on the next reconcile",
            )
        out.append((typed, count))
    return out


def all(
    llmservice: LLMService,
    plan: Plan,
    *,
    monitoring_available: bool = True,
    lws_available: bool = True,
    images: ImageTable = DEFAULT_IMAGES,
    routing_available: bool = True,
    picker_role: str = DEFAULT_PICKER_ROLE,
    placement: str | None = None,
    split: Mapping[str, int] | None = None,
) -> list[dict[str, Any]]:
    """`placement`: the provider of GPU node labels (capacity/placement.py; None: the
    operator's default). `split`: spec.gpu.type auto's replicas per GPU type (split_plans;
    a disaggregated plan runs its roles on the chosen type)."""
    disaggregated = roles.roles_of(plan) is not None
    roles.check(llmservice, plan, routing_available)
    typed = [] if disaggregated else split_plans(plan, split, llmservice.spec.replicas)
    for each, _ in typed:
        check_name(llmservice, each, typed=plan.choice is not None)
        _check_lws(each, lws_available)
    for each in roles.role_plans(plan):
        check_name(llmservice, each, len("-prefill") if disaggregated else 0)
        cache_affinity.check(llmservice, each)
        check_simulate(llmservice, each)
        _check_lws(each, lws_available)
    check_rollout(llmservice)
    manifests: list[dict[str, Any]] = []
    claim = model_cache_claim(llmservice)
    if claim is not None:
        manifests.append(claim)
    if disaggregated:
        manifests += roles.workloads(llmservice, plan, images, placement)
    else:
        for each, count in typed:
            auto = plan.choice is not None
            place = Place(placement, count if auto else None, typed=auto)
            manifests.append(workload(llmservice, each, images, None, place))
    manifests.append(service(llmservice, plan))
    manifests.append(pod_disruption_budget(llmservice, plan))
    if monitoring_available:
        manifests.append(pod_monitor(llmservice, plan))
    if routing_available:
        # After the engines' own objects: the controller reads the first Deployment and
        # Service of the list as the engines'.
        manifests += routing_manifests(
            llmservice,
            plan,
            images,
            monitoring_available=monitoring_available,
            picker_role=picker_role,
        )
    return manifests
