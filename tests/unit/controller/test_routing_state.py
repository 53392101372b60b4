"""controller.routing.routing_state: whether spec.routing can be rendered, as a table."""

from __future__ import annotations

from typing import Any

import pytest

from tokenfleet.api import parse_llmservice
from tokenfleet.controller.routing import POOL_API, ROUTE_API, routing_state, zero_floor


class Discovery:
    """The one KubeClient call routing_state makes: which APIs are served."""

    def __init__(self, *served: str) -> None:
        self.served = set(served)

    async def has_resource(self, group_version: str, plural: str) -> bool:
        return group_version in self.served


def service(**routing: Any) -> Any:
    return parse_llmservice(
        {
            "apiVersion": "tokenfleet.dev/v1alpha1",
            "kind": "LLMService",
            "metadata": {"name": "chat", "namespace": "a"},
            "spec": {"model": {"id": "meta-llama/Llama-3.1-8B"}, "gpu": {"type": "l4"},
                     "routing": routing},
        }
    )  # fmt: skip


@pytest.mark.parametrize(
    ("routing", "served", "available", "status", "reason"),
    [
        ({}, (POOL_API, ROUTE_API), False, False, "Disabled"),
        ({"enabled": True}, (POOL_API,), True, True, "PoolApplied"),
        ({"enabled": True}, (ROUTE_API,), False, False, "InferencePoolMissing"),
        ({"enabled": True}, (), False, False, "InferencePoolMissing"),
        ({"enabled": True, "gateway": {"name": "gw"}}, (POOL_API,), False, False,
         "HTTPRouteMissing"),
        ({"enabled": True, "gateway": {"name": "gw"}}, (POOL_API, ROUTE_API), True, True,
         "PoolApplied"),
    ],
)  # fmt: skip
async def test_routing_state(
    routing: dict[str, Any], served: tuple[str, ...], available: bool, status: bool, reason: str
) -> None:
    state = await routing_state(Discovery(*served), service(**routing))  # type: ignore[arg-type]
    assert (state.available, state.condition.status, state.condition.reason) == (
        available, status, reason,
    )  # fmt: skip
    # Prune must know which routing APIs exist, whatever the spec says now.
    assert state.served == {POOL_API: POOL_API in served, ROUTE_API: ROUTE_API in served}
    if not status and reason != "Disabled":
        assert "install" in state.condition.message


@pytest.mark.parametrize(
    ("min_replicas", "routing_status", "floor"),
    [
        (0, "True", 0),  # the picker holds requests: zero allowed
        (0, "False", 1),  # the CRD missing (or routing off): never zero
        (0, None, 1),  # not reconciled yet
        (2, "True", 2),
        (2, None, 2),
    ],
)
def test_zero_floor(min_replicas: int, routing_status: str | None, floor: int) -> None:
    spec = service(enabled=True).spec
    spec = spec.model_copy(
        update={"autoscaling": spec.autoscaling.model_copy(update={"min_replicas": min_replicas})}
    )
    conditions = [] if routing_status is None else [{"type": "Routing", "status": routing_status}]
    assert zero_floor(spec, {"conditions": conditions}) == floor
