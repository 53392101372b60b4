"""Before a scale-down: the least busy engine pods are removed first.

Every engine pod of a Deployment gets `controller.kubernetes.io/pod-deletion-cost` = its
requests in flight (running + waiting, from Prometheus), so the ReplicaSet removes the
least busy pods first; the pods' preStop drain and terminationGracePeriodSeconds
(render/timing.py) let their in-flight requests finish. A LeaderWorkerSet removes the
highest group index whatever the annotation says: nothing is set for it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from typing import Any

from tokenfleet.autoscale.prometheus import PrometheusError
from tokenfleet.autoscale.signals import SignalsQuery
from tokenfleet.controller.kube import ApiError, KubeClient
from tokenfleet.controller.prometheus_source import SignalSource

DELETION_COST = "controller.kubernetes.io/pod-deletion-cost"


async def set_deletion_costs(
    kube: KubeClient,
    source: SignalSource,
    body: Mapping[str, Any],
    query: SignalsQuery,
    url: str,
    *,
    nodes_per_replica: int,
    now: float,
    deadline: float,
    logger: logging.Logger,
) -> None:
    """Best effort: without costs the ReplicaSet still picks (unready pods first)."""
    selector = (body.get("status") or {}).get("selector")
    if not selector or nodes_per_replica > 1:
        return
    namespace, name = query.namespace, query.llmservice
    try:
        async with asyncio.timeout(deadline):
            load = await source.pod_load(query, url, now)
        pods = await kube.list("v1", "Pod", namespace, str(selector))
        for pod in pods:
            pod_name = pod["metadata"]["name"]
            # Unreported pods (still starting, or not scraped) cost 0: deleted first.
            cost = str(round(load.get(pod_name, 0.0)))
            annotations = pod["metadata"].get("annotations") or {}
            if annotations.get(DELETION_COST) != cost:
                patch = {"metadata": {"annotations": {DELETION_COST: cost}}}
                await kube.patch("v1", "Pod", namespace, pod_name, patch)
    except (PrometheusError, ApiError, TimeoutError) as error:
        logger.warning("%s/%s: pod-deletion-cost not set: %s", namespace, name, error)
