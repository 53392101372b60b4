"""Which objects the operator may write and which it must remove. Kubernetes I/O only.

- `conflicts`: before the first write to a name, the object must be absent or carry this
  LLMService's ownerReference (by uid). Server-side apply with force would otherwise take over
  a namesake (even `default/kubernetes`), and the garbage collector would delete it with the
  LLMService.
- `prune`: after a successful apply, delete the objects this LLMService owns (label AND
  ownerReference uid: a label alone can be forged by anyone) that the render no longer
  produces, e.g. the Deployment left behind when a replica moves to a LeaderWorkerSet. The
  model-cache PVC follows its `tokenfleet.dev/retain` annotation (spec.storage.retain when it
  was last rendered; absent means keep, so downloaded weights are never lost by default).
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from tokenfleet.controller.kube import KubeClient
from tokenfleet.render.storage import RETAIN_ANNOTATION

INSTANCE_LABEL = "tokenfleet.dev/llmservice"
# (apiVersion, kind) of everything render can produce, in the order they are pruned
# (workloads first: they hold the GPUs).
RENDERED_KINDS = (
    ("leaderworkerset.x-k8s.io/v1", "LeaderWorkerSet"),
    ("apps/v1", "Deployment"),
    ("policy/v1", "PodDisruptionBudget"),
    ("monitoring.coreos.com/v1", "PodMonitor"),
    ("v1", "Service"),
    ("v1", "PersistentVolumeClaim"),
    # spec.routing (render.routing): the pool first, so the Gateway stops sending to the
    # picker before the picker goes.
    ("gateway.networking.k8s.io/v1", "HTTPRoute"),
    ("inference.networking.k8s.io/v1", "InferencePool"),
    ("rbac.authorization.k8s.io/v1", "RoleBinding"),
    ("v1", "ServiceAccount"),
)
# Kinds of which render may produce two objects (the engines' and the endpoint picker's;
# the picker's two RoleBindings; a workload and an identity per role of disaggregated
# serving): rendering one of them does not mean nothing of that kind is stale.
SHARED_KINDS = frozenset(
    {"Deployment", "LeaderWorkerSet", "Service", "PodMonitor", "RoleBinding", "ServiceAccount"}
)


def owned_by(obj: Mapping[str, Any], uid: str) -> bool:
    refs = (obj.get("metadata") or {}).get("ownerReferences") or []
    return any(ref.get("uid") == uid for ref in refs)


def conflict_message(obj: Mapping[str, Any], kind: str, owner_name: str) -> str:
    meta = obj.get("metadata") or {}
    where = f"{kind} {meta.get('namespace')}/{meta.get('name')}"
    refs = meta.get("ownerReferences") or []
    held = (
        ", ".join(f"{r.get('kind')} {r.get('name')}" for r in refs) or "nobody (created by hand?)"
    )
    return (
        f"{where} already exists and is not owned by LLMService {owner_name} (owned by {held}); "
        f"the operator writes nothing rather than take it over: rename the LLMService "
        f"(metadata.name) or delete / rename that {kind}"
    )


async def conflicts(
    kube: KubeClient,
    manifests: Sequence[Mapping[str, Any]],
    owner: Mapping[str, Any],
    known: set[tuple[str, str, str]],
) -> list[str]:
    """Messages for manifests whose name is taken by an object this LLMService does not own.

    `known`: (kind, namespace, name) this process already wrote for the owner; they were
    checked before that write and are dropped from it when deleted, so they skip the read.
    """
    uid = str(owner["metadata"]["uid"])
    unknown = [
        (
            str(m["apiVersion"]),
            str(m["kind"]),
            str(m["metadata"]["namespace"]),
            str(m["metadata"]["name"]),
        )
        for m in manifests
        if (m["kind"], m["metadata"]["namespace"], m["metadata"]["name"]) not in known
    ]
    # Concurrently: one round trip, not one per manifest, before the first write.
    existing = await asyncio.gather(*(kube.get(*key) for key in unknown))
    return [
        conflict_message(obj, kind, owner["metadata"]["name"])
        for (_, kind, _, _), obj in zip(unknown, existing, strict=True)
        if obj is not None and not owned_by(obj, uid)
    ]


@dataclass
class Pruned:
    deleted: list[str] = field(default_factory=list)  # "Kind/name"
    retained: list[str] = field(default_factory=list)  # PVC names kept by the retain policy


async def prune(
    kube: KubeClient,
    owner: Mapping[str, Any],
    rendered: Sequence[Mapping[str, Any]],
    served: Mapping[str, bool],
) -> Pruned:
    """Delete owned objects the render no longer produces (see the module docstring).

    `served`: apiVersion or kind -> whether to list it: an API the cluster does not serve,
    or the routing kinds in a namespace where routing was never applied (the operator may
    hold no right to list them there; controller/routing.py).
    """
    meta = owner["metadata"]
    namespace, name, uid = meta["namespace"], meta["name"], str(meta["uid"])
    keep = {(str(m["kind"]), str(m["metadata"]["name"])) for m in rendered}
    rendered_kinds = {kind for kind, _ in keep}
    result = Pruned()
    for api_version, kind in RENDERED_KINDS:
        # render names each kind after the LLMService alone (one object per kind, but for
        # the picker's), so a kind it still produces has nothing stale to remove: list only
        # the others.
        still_rendered = kind in rendered_kinds and kind not in SHARED_KINDS
        listed = served.get(kind, True) and served.get(api_version, True)
        if still_rendered or not listed:
            continue
        for obj in await kube.list(api_version, kind, namespace, f"{INSTANCE_LABEL}={name}"):
            obj_meta = obj.get("metadata") or {}
            obj_name = str(obj_meta.get("name"))
            mine = (obj_meta.get("labels") or {}).get(INSTANCE_LABEL) == name
            if (kind, obj_name) in keep or not mine or not owned_by(obj, uid):
                continue
            if kind == "PersistentVolumeClaim":
                annotations = obj_meta.get("annotations") or {}
                if annotations.get(RETAIN_ANNOTATION, "true") != "false":
                    result.retained.append(obj_name)
                    continue
            await kube.delete(api_version, kind, namespace, obj_name, str(obj_meta.get("uid")))
            result.deleted.append(f"{kind}/{obj_name}")
    return result
