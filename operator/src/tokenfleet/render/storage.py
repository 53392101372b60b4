"""The model-cache PersistentVolumeClaim (spec.storage): weights are downloaded once into
it instead of into an emptyDir on every pod start. ReadWriteOnce is the default because the
default storage class of EKS, GKE and AKS offers nothing else (a ReadWriteMany claim there
stays Pending and no pod schedules); with it every pod that mounts the claim must land on
one node. ReadWriteMany, on an RWX class, lets replicas on different nodes share it."""

from __future__ import annotations

from typing import Any

from tokenfleet.api import LLMService
from tokenfleet.render.meta import metadata
from tokenfleet.render.pod import cache_claim_name

RETAIN_ANNOTATION = "tokenfleet.dev/retain"


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
    meta = metadata(service, cache_claim_name(service))
    # Read by the operator when spec.storage is removed later (controller.ownership.prune):
    # the policy in force when the claim was last rendered decides whether it is deleted.
    meta["annotations"] = {RETAIN_ANNOTATION: "true" if storage.retain else "false"}
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": meta, "spec": spec}
