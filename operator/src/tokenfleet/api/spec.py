"""The LLMService resource: spec (what the user wants) and the object wrapper."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

from tokenfleet.api.adapters import (
    ADAPTER_RULES,
    MAX_ADAPTERS,
    AdapterSpec,
    LoraSpec,
    check_adapters,
)
from tokenfleet.api.autoscaling import AutoscalingSpec
from tokenfleet.api.base import SpecModel, cel_rules, check, section
from tokenfleet.api.deploy import PodTemplateSpec, ResourcesSpec, RolloutSpec, StorageSpec
from tokenfleet.api.engine import EngineSpec
from tokenfleet.api.gpu import GpuSpec
from tokenfleet.api.model import ModelSpec
from tokenfleet.api.routing import ZERO_NEEDS_ROUTING, RoutingSpec
from tokenfleet.api.serving import SERVING_RULES, ServingSpec, check_serving
from tokenfleet.api.status import LLMServiceStatus
from tokenfleet.api.workload import SloSpec, WorkloadSpec

GROUP = "tokenfleet.dev"
VERSION = "v1alpha1"
API_VERSION = f"{GROUP}/{VERSION}"
KIND = "LLMService"
PLURAL = "llmservices"


class LLMServiceSpec(SpecModel):
    """An OpenAI-compatible LLM endpoint served by vLLM or SGLang on GPUs, sized by the
    tokenfleet capacity planner and scaled against its SLO."""

    model_config = ConfigDict(
        json_schema_extra=cel_rules(ZERO_NEEDS_ROUTING, *ADAPTER_RULES, *SERVING_RULES)
    )

    model: ModelSpec
    """The model to serve."""
    engine: EngineSpec = section(EngineSpec)
    """Inference engine."""
    gpu: GpuSpec
    """GPU type and placement."""
    workload: WorkloadSpec = section(WorkloadSpec)
    """Request shape a replica is sized for."""
    slo: SloSpec = section(SloSpec)
    """Latency objectives."""
    replicas: int = Field(default=1, ge=0, le=1000)
    """Replicas (each one a full copy of the model on gpusPerReplica GPUs). Written by the
    autoscaler when autoscaling.enabled."""
    autoscaling: AutoscalingSpec = section(AutoscalingSpec)
    """SLO-driven autoscaling."""
    storage: StorageSpec | None = None
    """Model cache volume; unset: weights are downloaded to an emptyDir on each start."""
    resources: ResourcesSpec | None = None
    """CPU / memory overrides of the engine container."""
    pod_template: PodTemplateSpec = section(PodTemplateSpec)
    """Additions to the engine pods."""
    rollout: RolloutSpec = section(RolloutSpec)
    """Update strategy."""
    routing: RoutingSpec = section(RoutingSpec)
    """Inference-aware routing (InferencePool + endpoint picker); needed to scale to zero."""
    adapters: list[AdapterSpec] = Field(
        default_factory=list,
        max_length=MAX_ADAPTERS,
        json_schema_extra={"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"]},
    )
    """LoRA adapters served on top of the base model, each under its own model name."""
    lora: LoraSpec | None = None
    """LoRA serving settings (GPU slots, loading). Unset with adapters listed: defaults."""
    serving: ServingSpec = section(ServingSpec)
    """Aggregated or disaggregated prefill / decode serving."""

    @model_validator(mode="after")
    def _zero_needs_routing(self) -> LLMServiceSpec:
        check(
            ZERO_NEEDS_ROUTING,
            self.autoscaling.min_replicas > 0 or self.routing.enabled,
            f"minReplicas={self.autoscaling.min_replicas}, routing.enabled={self.routing.enabled}",
        )
        hf = self.model.effective_source.hugging_face
        check_adapters(
            self.adapters,
            self.lora,
            self.model.effective_served_name,
            self.engine.kind,
            hf.token_secret_ref if hf else None,
        )
        check_serving(self.serving, self.routing.enabled, self.engine.kind)
        return self

    @property
    def lora_enabled(self) -> bool:
        """The engine runs with LoRA slots: adapters are listed or spec.lora is set."""
        return bool(self.adapters) or self.lora is not None


class LLMService(BaseModel):
    """A whole LLMService object as the API server (or kopf) hands it over."""

    model_config = ConfigDict(
        extra="ignore", validate_by_name=True, validate_by_alias=True, serialize_by_alias=True
    )

    api_version: str = Field(default=API_VERSION, alias="apiVersion")
    kind: str = KIND
    metadata: dict[str, Any] = Field(default_factory=dict)
    spec: LLMServiceSpec
    status: LLMServiceStatus | None = None

    @property
    def name(self) -> str:
        return str(self.metadata.get("name", ""))

    @property
    def namespace(self) -> str:
        return str(self.metadata.get("namespace", "default"))

    @property
    def generation(self) -> int | None:
        gen = self.metadata.get("generation")
        return int(gen) if gen is not None else None

    def to_dict(self) -> dict[str, Any]:
        return self.model_dump(mode="json", by_alias=True, exclude_none=True)
