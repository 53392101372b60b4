"""An LLMService's desired state: (spec, model config, cluster) -> plan -> manifests. Pure.

The one pipeline behind both the operator (controller/reconcile.py) and `tokenfleet
render` (commands/render.py), so what the CLI prints is what the operator applies. Each
caller does its own I/O first: it parses the body, reads the model's config.json where
`config_map_ref` points (the controller from the cluster, the CLI from the given files;
`model_config` reads the text the same way for both) and says what the cluster serves
(`Cluster`). Failures name the step they came from (`StepFailed`) so the controller can
tell a plan that cannot be made (Planned=False) from a plan that cannot be rendered.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from tokenfleet import render
from tokenfleet.api import LLMService, plan_service, to_plan_request
from tokenfleet.capacity.types import Plan, PlanRequest
from tokenfleet.engines.images import DEFAULT_IMAGES, ImageTable
from tokenfleet.render.routing import DEFAULT_PICKER_ROLE

PlanStep = Callable[[PlanRequest], Plan]
# spec.gpu.type auto: the replicas per GPU type, from the plan (the fallback's decision).
Split = Callable[[Plan], Mapping[str, int] | None]
# Called between plan and render; raises to refuse (the controller's allowlists and its
# LeaderWorkerSet check, which must win over a render error).
Admit = Callable[[LLMService, Plan], None]


@dataclass(frozen=True)
class Cluster:
    """What the target cluster serves (the CLI's --no-monitoring / --no-lws)."""

    monitoring: bool = True  # the Prometheus Operator's PodMonitor
    lws: bool = True  # LeaderWorkerSet
    routing: bool = True  # Gateway API Inference Extension
    images: ImageTable = field(default_factory=lambda: DEFAULT_IMAGES)
    # The chart's ClusterRole the endpoint pickers are bound to (--picker-cluster-role).
    picker_role: str = DEFAULT_PICKER_ROLE
    placement: str | None = None  # GPU node labels' provider (None: the process default)


@dataclass(frozen=True)
class Desired:
    service: LLMService
    plan: Plan
    manifests: list[dict[str, Any]]


class StepFailed(Exception):
    """`error` raised by the plan or the render step (`plan` is set for a render failure)."""

    def __init__(
        self, step: Literal["plan", "render"], error: Exception, plan: Plan | None = None
    ) -> None:
        super().__init__(str(error))
        self.step = step
        self.error = error
        self.plan = plan


def config_map_ref(service: LLMService) -> tuple[str, str] | None:
    """(name, key) of spec.model.configMapRef, unless an inline spec.model.config wins."""
    model = service.spec.model
    ref = model.config_map_ref
    if ref is None or model.config is not None:
        return None
    return ref.name, ref.key or "config.json"


def model_config(raw: str) -> dict[str, Any]:
    """A config.json kept as text (a ConfigMap value). ValueError names the problem."""
    try:
        config = json.loads(raw)
    except ValueError as error:
        raise ValueError(f"not JSON ({error})") from None
    if not isinstance(config, dict):
        raise ValueError("not a JSON object")
    return config


def desired(
    service: LLMService,
    config: dict[str, Any] | None,
    cluster: Cluster = Cluster(),
    *,
    plan: PlanStep = plan_service,
    admit: Admit | None = None,
    split: Split | None = None,
    planned: Plan | None = None,
) -> Desired:
    """Plan `service` (with its resolved model `config`) and render it for `cluster`.

    `plan` is swappable for tests that stall or fail the planner; its errors and the
    render's become StepFailed, while `admit`'s propagate unchanged. `planned`: the plan
    already made for this spec and config (the operator's kept plan): rendered, not redone.
    """
    if planned is None:
        try:
            planned = plan(to_plan_request(service, config))
        except Exception as error:
            raise StepFailed("plan", error) from error
    if admit is not None:
        admit(service, planned)
    try:
        per_type = split(planned) if split is not None else None
        manifests = render.all(
            service,
            planned,
            monitoring_available=cluster.monitoring,
            lws_available=cluster.lws,
            images=cluster.images,
            routing_available=cluster.routing,
            picker_role=cluster.picker_role,
            placement=cluster.placement,
            split=per_type,
        )
    except Exception as error:
        raise StepFailed("render", error, planned) from error
    return Desired(service, planned, manifests)
