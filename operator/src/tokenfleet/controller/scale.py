"""The autoscaler's one write to an LLMService's spec: replicas, through its scale
subresource (the field `kubectl scale` and an HPA write, so they stay coherent)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tokenfleet.api.spec import API_VERSION, KIND
from tokenfleet.controller.kube import ApiError, KubeClient

# Scale writes in a row that may meet a 409 from a status or annotation write (the spec
# unchanged) before the tick gives up: as for status (controller/statuswrite.py).
SCALE_ATTEMPTS = 5


async def scale_replicas(kube: KubeClient, body: Mapping[str, Any], replicas: int) -> bool:
    """PATCH the scale subresource under the resourceVersion the decision was made on.

    A 409 whose cause left the spec as it was (a status write, kopf's annotations) is
    retried on the fresh version; one that changed the spec (a `kubectl scale`, an edit:
    a new generation) means the decision is stale: False, nothing written."""
    meta = body.get("metadata") or {}
    namespace, name = str(meta.get("namespace")), str(meta.get("name"))
    generation = meta.get("generation")
    version = meta.get("resourceVersion")
    for _ in range(SCALE_ATTEMPTS):
        try:
            await kube.scale(API_VERSION, KIND, namespace, name, replicas, resource_version=version)
            return True
        except ApiError as error:
            if error.status != 409:
                raise
        fresh = await kube.get(API_VERSION, KIND, namespace, name)
        if fresh is None or (fresh.get("metadata") or {}).get("generation") != generation:
            return False
        version = (fresh.get("metadata") or {}).get("resourceVersion")
    return False
