"""spec.storage, spec.resources, spec.podTemplate, spec.rollout: how the pods are run."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, field_validator

from tokenfleet.api.base import INT_OR_STRING, SpecModel, section
from tokenfleet.api.kubevalues import (
    Annotations,
    Labels,
    check_positive_quantity,
    check_quantity,
)

QUANTITY_PATTERN = r"^[0-9]+(\.[0-9]+)?(m|k|M|G|T|P|E|Ki|Mi|Gi|Ti|Pi|Ei)?$"


def _quantity(description: str) -> Any:
    return Field(default=None, description=description, json_schema_extra=INT_OR_STRING)


class StorageSpec(SpecModel):
    """A PersistentVolumeClaim the operator creates as the model cache (Hugging Face
    downloads land there once instead of on every pod start)."""

    size: str = Field(default="100Gi", pattern=QUANTITY_PATTERN)
    """Claim size, a Kubernetes quantity."""
    storage_class_name: str | None = Field(default=None, max_length=253)
    """Storage class. Default: the cluster default."""
    access_mode: Literal["ReadWriteOnce", "ReadWriteMany", "ReadOnlyMany", "ReadWriteOncePod"] = (
        "ReadWriteOnce"
    )
    """ReadWriteOnce binds on every cloud's default storage class; it attaches to one node,
    so with more than one replica the engine pods get a required pod affinity to that node
    (replicas are then capped by its GPUs; one that does not fit stays Pending with the
    scheduler's reason). ReadWriteMany (with an RWX class: EFS, Filestore, Azure Files,
    CephFS) lets replicas on different nodes share one cache. ReadWriteOncePod with more
    than one replica, and ReadWriteOnce for a replica that spans nodes, are refused."""
    retain: bool = True
    """Keep the claim (and the downloaded weights) when storage is later removed from the
    spec; false: the operator deletes it then. Deleting the LLMService always deletes it."""

    @field_validator("size")
    @classmethod
    def _positive_size(cls, value: str) -> str:
        return str(check_positive_quantity(value))


class ResourceList(SpecModel):
    cpu: int | str | None = _quantity("CPU, e.g. 8 or 7500m.")
    memory: int | str | None = _quantity("Memory, e.g. 64Gi.")

    @field_validator("cpu", "memory")
    @classmethod
    def _check(cls, value: int | str | None) -> int | str | None:
        return None if value is None else check_quantity(value)


class ResourcesSpec(SpecModel):
    """CPU / memory of the engine container; GPUs come from spec.gpu. Default: planned."""

    requests: ResourceList = section(ResourceList)
    limits: ResourceList = section(ResourceList)


class LocalObjectReference(SpecModel):
    name: str = Field(min_length=1, max_length=253)


class PodSecurityContext(SpecModel):
    """Who the engine runs as (pod securityContext). The operator always sets
    seccompProfile RuntimeDefault, no privilege escalation and no capabilities; these
    complete Pod Security "restricted". The upstream vLLM / SGLang images run as root,
    so runAsNonRoot needs runAsUser too; fsGroup makes the model-cache PVC writable."""

    run_as_non_root: bool | None = None
    """Refuse to start a container that would run as root (set runAsUser with it)."""
    run_as_user: int | None = Field(default=None, ge=1, le=2147483647)
    """UID of the engine process, e.g. 1000."""
    run_as_group: int | None = Field(default=None, ge=0, le=2147483647)
    """Primary GID of the engine process."""
    fs_group: int | None = Field(default=None, ge=0, le=2147483647)
    """Group that owns (and may write) mounted volumes: the model-cache PVC."""


class PodTemplateSpec(SpecModel):
    """Additions to the engine pods."""

    labels: Labels = Field(default_factory=dict)
    """Extra pod labels (the operator's own labels win)."""
    annotations: Annotations = Field(default_factory=dict)
    """Extra pod annotations."""
    service_account_name: str | None = Field(default=None, max_length=253)
    """Service account of the pods."""
    priority_class_name: str | None = Field(default=None, max_length=253)
    """Priority class of the pods."""
    image_pull_secrets: list[LocalObjectReference] = Field(default_factory=list, max_length=16)
    """Secrets for pulling a private engine image."""
    security_context: PodSecurityContext | None = None
    """Run the engine as a non-root user (see PodSecurityContext)."""


class RolloutSpec(SpecModel):
    """How a spec change replaces pods. maxSurge 0 replaces in place, so an update needs
    no spare GPUs (at the cost of maxUnavailable replicas being down meanwhile)."""

    max_surge: int | str = Field(default=0, json_schema_extra=INT_OR_STRING)
    """Extra replicas during an update (a number or a percentage)."""
    max_unavailable: int | str = Field(default=1, json_schema_extra=INT_OR_STRING)
    """Replicas that may be down during an update (a number or a percentage)."""
