"""spec.gpu: the accelerator type, how many per replica, and where the pods may run."""

from __future__ import annotations

from typing import Annotated, Any, Literal, get_args

from pydantic import AfterValidator, ConfigDict, Field, WithJsonSchema, model_validator
from pydantic_core import PydanticCustomError

from tokenfleet.api.base import FREE_FORM, Rule, SpecModel, cel_rules, check, section
from tokenfleet.api.kubevalues import Labels, check_affinity

# The GPU ids of the capacity catalog (tokenfleet.capacity.gpus.GPUS); a unit test keeps
# the two equal, so a GPU added there must be added here (and in the CRD) too.
GpuType = Literal[
    "a10g",
    "l4",
    "l40s",
    "a100-40gb",
    "a100-80gb",
    "h100-sxm",
    "h100-pcie",
    "h200",
    "b200",
    "mi300x",
    # MIG slices (capacity/mig.py): one slice per replica
    "a100-80gb-mig-1g.10gb",
    "a100-80gb-mig-1g.20gb",
    "a100-80gb-mig-2g.20gb",
    "a100-80gb-mig-3g.40gb",
    "a100-80gb-mig-4g.40gb",
    "a100-80gb-mig-7g.80gb",
    "h100-sxm-mig-1g.10gb",
    "h100-sxm-mig-1g.20gb",
    "h100-sxm-mig-2g.20gb",
    "h100-sxm-mig-3g.40gb",
    "h100-sxm-mig-4g.40gb",
    "h100-sxm-mig-7g.80gb",
]


def _catalog_gpu(value: str) -> str:
    """A GPU type of the live catalog: the built-in GpuType ids, plus the types an operator's
    catalog overlay adds (tokenfleet.capacity.overlay; the chart then lists them in the CRD)."""
    from tokenfleet.capacity.gpus import GPUS  # capacity does not import api: no cycle

    if value not in GPUS:
        expected = ", ".join(repr(g) for g in GPUS)
        raise PydanticCustomError(
            "literal_error", "Input should be {expected}", {"expected": expected}
        )
    return value


# The CRD lists the built-in types (a typo fails at kubectl apply); the operator checks the
# catalog it runs with, so a type added by its overlay (and by the chart to the CRD) parses.
CatalogGpuType = Annotated[
    str,
    AfterValidator(_catalog_gpu),
    WithJsonSchema({"type": "string", "enum": list(get_args(GpuType))}),
]
AUTO = "auto"


def _catalog_gpu_or_auto(value: str) -> str:
    return value if value == AUTO else _catalog_gpu(value)


# spec.gpu.type: a catalog type, or "auto" (the planner chooses among candidates).
GpuTypeOrAuto = Annotated[
    str,
    AfterValidator(_catalog_gpu_or_auto),
    WithJsonSchema({"type": "string", "enum": [AUTO, *get_args(GpuType)]}),
]

CANDIDATES_NEED_AUTO = Rule(
    "!has(self.candidates) || size(self.candidates) == 0 || self.type == 'auto'",
    "candidates are the types type auto chooses from",
    "set type: auto, or remove candidates",
)
ONE_PRICE_NEEDS_ONE_TYPE = Rule(
    "self.type != 'auto' || !has(self.pricePerHour)",
    "pricePerHour is the price of one type, and type auto chooses among several",
    "give each candidate its pricePerHour",
)
CANDIDATES_UNIQUE = Rule(
    "!has(self.candidates) || self.candidates.all(c, "
    "self.candidates.filter(d, d.type == c.type).size() == 1)",
    "candidates name a type twice",
    "list each type once",
)

TP_TIMES_PP_IS_COUNT = Rule(
    "!has(self.count) || !has(self.tensorParallelSize) || !has(self.pipelineParallelSize)"
    " || self.tensorParallelSize * self.pipelineParallelSize == self.count",
    "tensorParallelSize * pipelineParallelSize must equal count",
    "fix the numbers or leave one of the three unset to have it planned",
)
TP_DIVIDES_COUNT = Rule(
    "!has(self.count) || !has(self.tensorParallelSize)"
    " || self.count % self.tensorParallelSize == 0",
    "count must be a multiple of tensorParallelSize",
    "fix the numbers or leave tensorParallelSize unset to have it planned",
)
PP_DIVIDES_COUNT = Rule(
    "!has(self.count) || !has(self.pipelineParallelSize)"
    " || self.count % self.pipelineParallelSize == 0",
    "count must be a multiple of pipelineParallelSize",
    "fix the numbers or leave pipelineParallelSize unset to have it planned",
)


class Toleration(SpecModel):
    """A Kubernetes toleration (GPU nodes are usually tainted)."""

    key: str | None = Field(default=None, max_length=316)
    operator: Literal["Exists", "Equal"] = "Equal"
    value: str | None = Field(default=None, max_length=63)
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute"] | None = None
    toleration_seconds: int | None = None


class GpuCandidateSpec(SpecModel):
    """A GPU type spec.gpu.type auto may choose."""

    type: CatalogGpuType
    """Catalog GPU type (`tokenfleet gpus`), a MIG slice included."""
    price_per_hour: float | None = Field(default=None, ge=0)
    """Price of one GPU-hour of this type. Default: the catalog's (or the operator's offer)."""
    max_count: int | None = Field(default=None, ge=1, le=100_000)
    """Most GPUs of this type the cluster gives this LLMService; beyond it replicas go to the
    next candidate. Default: no limit."""


class GpuFallbackSpec(SpecModel):
    """When the chosen type cannot be had (type auto)."""

    unschedulable_seconds: int = Field(default=300, ge=1, le=86_400)
    """An engine pod Unschedulable for want of its GPU this long moves new replicas to the
    next candidate (the scheduled ones keep serving)."""
    dwell_seconds: int = Field(default=600, ge=1, le=604_800)
    """The least time on the next candidate before one replica tries the preferred type
    again; when it schedules, new replicas return there."""


class GpuSpec(SpecModel):
    """The GPU type and count. Unset counts are chosen by the capacity planner."""

    model_config = ConfigDict(
        json_schema_extra=cel_rules(
            TP_TIMES_PP_IS_COUNT,
            TP_DIVIDES_COUNT,
            PP_DIVIDES_COUNT,
            CANDIDATES_NEED_AUTO,
            ONE_PRICE_NEEDS_ONE_TYPE,
            CANDIDATES_UNIQUE,
        )
    )

    type: GpuTypeOrAuto
    """GPU model (`tokenfleet gpus`), or auto: the planner picks the candidate with the lowest
    GPU cost per good request (the cheapest fleet with workload.targetRequestsPerSecond).
    Nodes are selected by the type's labels on the operator's placement provider (GFD's
    nvidia.com/gpu.product unless the chart's gpuPlacement says gke, eks, eks-auto or aks)."""
    candidates: list[GpuCandidateSpec] = Field(default_factory=list, max_length=16)
    """With type auto: the types to choose from, each optionally with its price and maxCount.
    Default: the operator's GPU offers (the chart's gpuCatalog.offers)."""
    fallback: GpuFallbackSpec = section(GpuFallbackSpec)
    """With type auto: moving replicas to the next candidate when the chosen type runs out."""
    count: int | None = Field(default=None, ge=1, le=64)
    """GPUs per replica. Default: the fewest that fit the model and meet the SLO."""
    tensor_parallel_size: int | None = Field(default=None, ge=1, le=64)
    """Tensor parallel size. Default: planned."""
    pipeline_parallel_size: int | None = Field(default=None, ge=1, le=16)
    """Pipeline parallel size (one stage per node when a replica spans nodes). Default: planned."""
    resource_name: str | None = Field(default=None, max_length=253)
    """Extended resource to request. Default: the catalog's, nvidia.com/gpu (amd.com/gpu on
    mi300x)."""
    node_selector: Labels = Field(default_factory=dict)
    """Extra node labels the pods require, added to the GPU product label."""
    tolerations: list[Toleration] = Field(default_factory=list, max_length=64)
    """Tolerations of the engine pods."""
    affinity: Annotated[dict[str, Any] | None, AfterValidator(check_affinity)] = Field(
        default=None, json_schema_extra=FREE_FORM
    )
    """A Kubernetes Affinity, passed through to the pods."""
    price_per_hour: float | None = Field(default=None, ge=0)
    """Price of one GPU-hour (for cost estimates). Default: the catalog's list price."""
    max_per_node: int | None = Field(default=None, ge=1, le=16)
    """GPUs available on one node, if fewer than the catalog's gpus per node (8)."""

    @model_validator(mode="after")
    def _counts(self) -> GpuSpec:
        check(CANDIDATES_NEED_AUTO, not self.candidates or self.type == AUTO, f"type={self.type}")
        check(ONE_PRICE_NEEDS_ONE_TYPE, self.type != AUTO or self.price_per_hour is None)
        types = [c.type for c in self.candidates]
        twice = sorted({t for t in types if types.count(t) > 1})
        check(CANDIDATES_UNIQUE, not twice, ", ".join(twice))
        count, tp, pp = self.count, self.tensor_parallel_size, self.pipeline_parallel_size
        if count is not None and tp is not None and pp is not None:
            check(TP_TIMES_PP_IS_COUNT, tp * pp == count, f"{tp} * {pp} != {count}")
        if count is not None and tp is not None:
            check(TP_DIVIDES_COUNT, count % tp == 0, f"count={count}, tensorParallelSize={tp}")
        if count is not None and pp is not None:
            check(PP_DIVIDES_COUNT, count % pp == 0, f"count={count}, pipelineParallelSize={pp}")
        return self
