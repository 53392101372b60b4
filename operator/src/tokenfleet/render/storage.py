"""The model-cache PersistentVolumeClaim (spec.storage): weights are downloaded once into
it instead of into an emptyDir on every pod start. ReadWriteMany (the default) lets
replicas on different nodes share it; with ReadWriteOnce every pod must land on one node."""

from __future__ import annotations

from typing import Any

from tokenfleet.api import LLMService
from tokenfleet.render.meta import metadata
from tokenfleet.render.pod import cache_claim_name


def model_cache_claim(service: LLMService) -> dict[str, Any] | None:
    storage = service.spec.storage
    if storage is None:
        return None
    spec: dict[str, Any] = {
        "accessModes": [storage.access_mode],
        "resources": {"requests": {"storage": storage.size}},
    }
    if storage.storage_class_name:
        spec["storageClassName"] = storage.storage_class_name
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": metadata(service, cache_claim_name(service)),
        "spec": spec,
    }
