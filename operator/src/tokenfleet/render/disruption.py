"""The PodDisruptionBudget: node drains evict one engine pod at a time.

maxUnavailable 1 rather than a minAvailable: with a single replica, minAvailable 1 would
block every drain of its node forever; maxUnavailable 1 lets the drain proceed while never
taking down two replicas at once. For a multi-node replica, evicting one pod restarts its
group; the group's pods are then unready, which holds further evictions until it is back.
"""

from __future__ import annotations

from typing import Any

from tokenfleet.api import LLMService
from tokenfleet.capacity.types import Plan
from tokenfleet.render.meta import metadata, selector


def pod_disruption_budget(service: LLMService, plan: Plan) -> dict[str, Any]:
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": metadata(service),
        "spec": {
            "maxUnavailable": 1,
            "selector": {"matchLabels": selector(service)},
            # Pods still loading weights are not serving; evicting them costs no capacity.
            "unhealthyPodEvictionPolicy": "AlwaysAllow",
        },
    }
