"""The LLMService API (tokenfleet.dev/v1alpha1): pydantic models, the single source of truth.

The CRD (crds/tokenfleet.dev_llmservices.yaml) is generated from these models by
`tokenfleet crd`; never edit it by hand.

Public names:
- LLMService: the whole object (apiVersion, kind, metadata dict, spec, status).
  `.name`, `.namespace`, `.generation`, `.to_dict()`.
- LLMServiceSpec: model (ModelSpec), engine (EngineSpec), gpu (GpuSpec), workload
  (WorkloadSpec), slo (SloSpec), replicas, autoscaling (AutoscalingSpec), storage
  (StorageSpec | None), resources (ResourcesSpec | None), pod_template (PodTemplateSpec),
  rollout (RolloutSpec).
- ModelSpec (.effective_source, .effective_served_name), ModelSource, HuggingFaceSource,
  PvcSource, SecretKeyRef, ConfigMapKeyRef.
- EngineSpec (.image_for(plan.engine_version)), EnvVar, default_image(kind, version).
- GpuSpec, Toleration. AutoscalingSpec, PrometheusSpec.
- StorageSpec, ResourcesSpec, ResourceList, PodTemplateSpec, RolloutSpec.
- LLMServiceStatus (.set_condition(type, status, reason, message, observed_generation)),
  Condition, PlanStatus (.from_plan(plan, engine_args)), Prediction, AutoscalingStatus,
  CapacityStatus, Signals.
- parse_llmservice(body) -> LLMService; raises SpecError (a UserError: .field, .value,
  .problem, .fix; str() is one line).
- to_plan_request(service, config=None) -> capacity.PlanRequest; raises UserError (PlanError
  where the planner refuses the request).
- plan_service(request) -> capacity.Plan: capacity.plan whose errors name spec fields.
- GROUP, VERSION, API_VERSION, KIND, PLURAL.
- build_crd() -> dict (tokenfleet.api.crd).

Models serialize to the YAML form with `.to_dict()` (camelCase, unset fields omitted) and
accept both camelCase and snake_case input.
"""

from tokenfleet.api.autoscaling import AutoscalingSpec, PrometheusSpec
from tokenfleet.api.deploy import (
    PodTemplateSpec,
    ResourceList,
    ResourcesSpec,
    RolloutSpec,
    StorageSpec,
)
from tokenfleet.api.engine import EngineSpec, EnvVar, default_image
from tokenfleet.api.gpu import GpuSpec, Toleration
from tokenfleet.api.model import (
    ConfigMapKeyRef,
    HuggingFaceSource,
    ModelSource,
    ModelSpec,
    PvcSource,
    SecretKeyRef,
)
from tokenfleet.api.parse import SpecError, parse_llmservice
from tokenfleet.api.planrequest import plan_service, spec_error, to_plan_request
from tokenfleet.api.routing import GatewayRef, RoutingSpec
from tokenfleet.api.spec import (
    API_VERSION,
    GROUP,
    KIND,
    PLURAL,
    VERSION,
    LLMService,
    LLMServiceSpec,
)
from tokenfleet.api.status import (
    AutoscalingStatus,
    CapacityStatus,
    Condition,
    LLMServiceStatus,
    PlanStatus,
    Prediction,
    Signals,
)
from tokenfleet.api.workload import SloSpec, WorkloadSpec

__all__ = [
    "API_VERSION",
    "GROUP",
    "KIND",
    "PLURAL",
    "VERSION",
    "AutoscalingSpec",
    "AutoscalingStatus",
    "CapacityStatus",
    "Condition",
    "ConfigMapKeyRef",
    "EngineSpec",
    "EnvVar",
    "GatewayRef",
    "GpuSpec",
    "HuggingFaceSource",
    "LLMService",
    "LLMServiceSpec",
    "LLMServiceStatus",
    "ModelSource",
    "ModelSpec",
    "PlanStatus",
    "PodTemplateSpec",
    "Prediction",
    "PrometheusSpec",
    "PvcSource",
    "ResourceList",
    "ResourcesSpec",
    "RolloutSpec",
    "RoutingSpec",
    "SecretKeyRef",
    "Signals",
    "SloSpec",
    "SpecError",
    "StorageSpec",
    "Toleration",
    "WorkloadSpec",
    "default_image",
    "parse_llmservice",
    "plan_service",
    "spec_error",
    "to_plan_request",
]
