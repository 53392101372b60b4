"""Disaggregated serving in the render: one workload per role, and the checks that keep a
plan the cluster cannot run from being half-created. Pure.

The plan (capacity/disagg) is the decode role's, with both roles in `plan.serving`. Decode
replicas are spec.replicas (the scale subresource's: `kubectl scale` and the autoscaler act on
the decode pool, the one whose pods hold each request to its end); prefill replicas are
spec.serving.prefillReplicas when set, else the planner's ratio of prefill to decode replicas
at their goodput applied to the decode replicas (rounded up; none when decode is at zero).
"""

from __future__ import annotations

import math
from typing import Any

from tokenfleet.api import LLMService
from tokenfleet.capacity.disagg.types import Role
from tokenfleet.capacity.types import Plan
from tokenfleet.engines import ServingRole, engine_info
from tokenfleet.engines.disagg import DECODE_PORT_OFFSET, SGLANG_BOOTSTRAP_PORT
from tokenfleet.engines.images import DEFAULT_IMAGES, ImageTable
from tokenfleet.errors import UserError
from tokenfleet.render.meta import Place, RoleRender
from tokenfleet.render.routing import sidecar
from tokenfleet.render.workload import workload


def roles_of(plan: Plan) -> tuple[Role, Role] | None:
    """(prefill, decode) when the plan disaggregates, else None."""
    return plan.serving.roles if plan.serving is not None else None


def prefill_replicas(service: LLMService, plan: Plan, decode: int) -> int:
    fixed = service.spec.serving.prefill_replicas
    if fixed is not None:
        return fixed
    roles = roles_of(plan)
    if roles is None or decode <= 0:
        return 0
    d = plan.serving.disaggregated if plan.serving is not None else None
    ratio = d.prefill_per_decode if d is not None else 1.0
    return max(1, math.ceil(decode * ratio - 1e-9))


def role_renders(service: LLMService, plan: Plan) -> list[tuple[Plan, RoleRender]]:
    """(role plan, role) in apply order: decode first (the controller reads the first
    workload as the one the scale subresource counts), then prefill."""
    roles = roles_of(plan)
    assert roles is not None
    prefill, decode = roles
    port = engine_info(plan.engine).port
    backend = service.spec.serving.transfer_backend
    decode_replicas = service.spec.replicas
    return [
        (
            decode.plan,
            RoleRender(
                ServingRole("decode", port + DECODE_PORT_OFFSET, backend, SGLANG_BOOTSTRAP_PORT),
                decode_replicas,
            ),
        ),
        (
            prefill.plan,
            RoleRender(
                ServingRole("prefill", port, backend, SGLANG_BOOTSTRAP_PORT),
                prefill_replicas(service, plan, decode_replicas),
            ),
        ),
    ]


def check(service: LLMService, plan: Plan, routing_available: bool) -> None:
    """Refuse what would leave a disaggregated LLMService without a path for its requests."""
    if roles_of(plan) is None:
        return
    chose = "" if service.spec.serving.mode == "disaggregated" else " (the planner chose it)"
    if not service.spec.routing.enabled:
        raise UserError(
            "spec.routing.enabled",
            False,
            f"disaggregated serving{chose} needs the endpoint picker's disaggregation profile "
            "to send each request to a prefill pod, then a decode pod",
            "set spec.routing.enabled: true, or spec.serving.mode: aggregated",
        )
    if not routing_available:
        raise UserError(
            "spec.serving.mode",
            service.spec.serving.mode,
            f"disaggregated serving{chose} needs the InferencePool API (Gateway API Inference "
            "Extension), which this cluster does not serve",
            "install the InferencePool CRD and a Gateway that implements it, or set "
            "spec.serving.mode: aggregated",
        )
    sidecar.check_service_account(service)


def workloads(
    service: LLMService,
    plan: Plan,
    images: ImageTable = DEFAULT_IMAGES,
    placement: str | None = None,
) -> list[dict[str, Any]]:
    """`placement`: the provider of GPU node labels (capacity/placement.py)."""
    place = Place(placement)
    return [workload(service, p, images, role, place) for p, role in role_renders(service, plan)]


def role_plans(plan: Plan) -> list[Plan]:
    roles = roles_of(plan)
    return [plan] if roles is None else [roles[1].plan, roles[0].plan]
