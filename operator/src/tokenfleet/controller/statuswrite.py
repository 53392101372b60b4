"""The one way LLMService status is written, by the reconciler and the autoscaler alike.

Two writers share one status: the reconciler owns Planned / Ready / Progressing / Degraded
and the workload keys (observedGeneration, phase, replicas, readyReplicas, selector,
endpoint, plan); the autoscaler owns the Autoscaling condition and status.autoscaling.
Each must change only its own part and never write back a stale copy of the other's.

So every write is a read-modify-write under optimistic concurrency:
1. take the freshest object (the caller's, or a GET),
2. `compose(object)` computes the whole new status from THAT object's status (keeping what
   other writers own as it is there, replacing the caller's own part, dropping the caller's
   keys that no longer hold),
3. send the difference as a JSON merge patch (removed keys as null) carrying the object's
   `metadata.resourceVersion`: the apiserver applies it only if nobody wrote in between,
   else answers 409, and we go back to 1 (bounded; then the 409 goes to the caller, whose
   own retry takes over).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from tokenfleet.api import API_VERSION, KIND
from tokenfleet.controller.kube import ApiError, KubeClient

# Conflicts in a row before giving up: two writers per LLMService, each writing at most a
# few times a minute, collide rarely; five tries absorb a burst (kopf annotations, a user's
# `kubectl scale`) and a persistent conflict is returned as a transient error.
STATUS_ATTEMPTS = 5

# object -> the complete new status, or None for "nothing to write" (e.g. it is being deleted)
Compose = Callable[[Mapping[str, Any]], dict[str, Any] | None]


@dataclass(frozen=True)
class StatusWrite:
    body: Mapping[str, Any]
    """The object the final compose() ran on (its status is `old`)."""
    old: Mapping[str, Any]
    new: Mapping[str, Any]
    written: bool
    """False when nothing changed (no PATCH sent)."""


def merge_patch(old: Mapping[str, Any], new: Mapping[str, Any]) -> dict[str, Any]:
    """The JSON merge patch (RFC 7386) that turns `old` into `new`: removed keys as None,
    nested objects diffed, lists (conditions) replaced whole. Replacing the conditions list
    is safe only because the patch carries a resourceVersion precondition."""
    patch: dict[str, Any] = {key: None for key in old if key not in new}
    for key, value in new.items():
        before = old.get(key)
        if isinstance(value, Mapping) and isinstance(before, Mapping):
            nested = merge_patch(before, value)
            if nested:
                patch[key] = nested
        elif key not in old or before != value:
            patch[key] = value
    return patch


async def write_status(
    kube: KubeClient,
    namespace: str,
    name: str,
    compose: Compose,
    *,
    body: Mapping[str, Any] | None = None,
    attempts: int = STATUS_ATTEMPTS,
) -> StatusWrite | None:
    """Write compose()'s status onto the LLMService; None if it is gone or compose declined.

    `body`, when given, is used for the first attempt (a caller that has just read the
    object saves a GET); after a 409 the object is read again. Raises ApiError: 409 after
    `attempts` conflicts in a row (transient), or whatever else the apiserver answered.
    """
    for _ in range(attempts):
        if body is None:
            body = await kube.get(API_VERSION, KIND, namespace, name)
            if body is None:
                return None
        old = dict(body.get("status") or {})
        new = compose(body)
        if new is None:
            return None
        patch = merge_patch(old, new)
        if not patch:
            return StatusWrite(body, old, new, written=False)
        version = (body.get("metadata") or {}).get("resourceVersion")
        try:
            result = await kube.patch_status(
                API_VERSION, KIND, namespace, name, patch, resource_version=version
            )
        except ApiError as error:
            if error.status != 409:
                raise
            body = None  # somebody wrote in between: start again from what they wrote
            continue
        return StatusWrite(result or body, old, new, written=True)
    raise ApiError(
        409,
        "Conflict",
        f"status changed under every one of {attempts} writes in a row; will retry",
        f"update status of {KIND} {namespace}/{name}",
    )
