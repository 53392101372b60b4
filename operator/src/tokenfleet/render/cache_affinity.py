"""Where the pods of a shared model cache may run (spec.storage). PURE.

A ReadWriteOnce claim attaches to one node at a time. With more than one replica, a second
pod scheduled elsewhere would wait on the volume's Multi-Attach error forever. The choice
made here: the engine pods of an LLMService that shares a ReadWriteOnce cache must land on
the node where its pods already run (required pod affinity on the node's hostname, the
first pod of the set free to go anywhere, as Kubernetes allows for self-affinity). What
that costs is said in the API's docs: replicas are capped by that node's GPUs, and a pod
that does not fit stays Pending with the scheduler's reason (Insufficient nvidia.com/gpu)
rather than mounted nowhere. ReadWriteMany (an RWX class) lifts it; ReadWriteOncePod (one
pod, ever) with more than one replica, and ReadWriteOnce for a replica that spans nodes,
cannot work at all and are refused with the fix.
"""

from __future__ import annotations

from typing import Any

from tokenfleet.api import LLMService
from tokenfleet.capacity.types import Plan
from tokenfleet.errors import UserError
from tokenfleet.render.meta import selector

HOSTNAME = "kubernetes.io/hostname"


def most_replicas(service: LLMService) -> int:
    spec = service.spec
    autoscaled = spec.autoscaling.max_replicas if spec.autoscaling.enabled else 0
    return max(spec.replicas, autoscaled)


def check(service: LLMService, plan: Plan) -> None:
    """Refuse the storage a fleet cannot mount (a UserError naming field and fix)."""
    storage = service.spec.storage
    if storage is None:
        return
    mode = storage.access_mode
    if mode == "ReadWriteOncePod" and most_replicas(service) > 1:
        raise UserError(
            "spec.storage.accessMode",
            mode,
            f"mounts in one pod only, and this LLMService may run {most_replicas(service)} "
            "replicas",
            "use ReadWriteOnce (its replicas then share one node) or ReadWriteMany",
        )
    if mode in ("ReadWriteOnce", "ReadWriteOncePod") and plan.nodes_per_replica > 1:
        raise UserError(
            "spec.storage.accessMode",
            mode,
            f"attaches to one node, and a replica spans {plan.nodes_per_replica} nodes",
            "use ReadWriteMany with an RWX storage class (EFS, Filestore, Azure Files, CephFS)",
        )


def pod_affinity(service: LLMService, plan: Plan) -> dict[str, Any] | None:
    """The affinity that keeps the pods on the cache's node, or None when none is needed."""
    storage = service.spec.storage
    if storage is None or storage.access_mode != "ReadWriteOnce" or most_replicas(service) < 2:
        return None
    term = {"labelSelector": {"matchLabels": selector(service)}, "topologyKey": HOSTNAME}
    return {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}


def merged(user: dict[str, Any] | None, ours: dict[str, Any] | None) -> dict[str, Any] | None:
    """The user's spec.gpu.affinity with our pod-affinity term added to its own terms."""
    if ours is None:
        return user
    out = dict(user or {})
    pod = dict(out.get("podAffinity") or {})
    key = "requiredDuringSchedulingIgnoredDuringExecution"
    pod[key] = [*(pod.get(key) or []), *ours["podAffinity"][key]]
    out["podAffinity"] = pod
    return out
