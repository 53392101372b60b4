"""controller.routing.routing_state: whether spec.routing can be rendered, as a table."""

from __future__ import annotations

from typing import Any

import pytest

from tokenfleet.api import parse_llmservice
from tokenfleet.controller.routing import (
    POOL_API,
    ROUTE_API,
    ROUTING_ONLY,
    routing_state,
    zero_floor,
)


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
    apis = {api: state.served[api] for api in (POOL_API, ROUTE_API)}
    assert apis == {POOL_API: POOL_API in served, ROUTE_API: ROUTE_API in served}
    if not status and reason != "Disabled":
        assert "install" in state.condition.message


@pytest.mark.parametrize(
    ("routing", "last_routing", "listed"),
    [
        ({}, None, False),  # never routed: the routing kinds are not listed (no right to)
        ({}, "False", False),
        ({}, "True", True),  # routing just turned off: its objects are pruned
        ({"enabled": True}, None, True),
    ],
)
async def test_routing_kinds_are_pruned_only_where_routing_was_applied(
    routing: dict[str, Any], last_routing: str | None, listed: bool
) -> None:
    conditions = [] if last_routing is None else [{"type": "Routing", "status": last_routing}]
    discovery = Discovery(POOL_API, ROUTE_API)
    state = await routing_state(discovery, service(**routing), {"conditions": conditions})  # type: ignore[arg-type]
    assert {kind: state.served[kind] for kind in ROUTING_ONLY} == dict.fromkeys(
        ROUTING_ONLY, listed
    )


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
