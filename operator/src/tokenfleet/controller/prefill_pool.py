"""Disaggregated serving in the autoscaler's tick: the prefill pool beside the decode pool.

The decode pool is the regular decision (spec.replicas through the scale subresource), read
on the decode pods' series alone. After it, this reads the prefill pods' series, asks the
pure autoscale/pools.py for the prefill replicas (inside the plan's ratio band, at zero
with decode) and writes them to spec.serving.prefillReplicas with a merge patch (a field
the operator's RBAC may patch, as kopf's annotations; a GitOps tool that does not set it
sees no drift). Everything it needs comes from status.plan.serving: the reconciler's plan of
this generation; nobody plans the LLMService here. I/O only: the rules are pure.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Mapping
from typing import Any

from tokenfleet.api.spec import API_VERSION, KIND
from tokenfleet.autoscale.pools import PrefillInputs, prefill_replicas
from tokenfleet.autoscale.prometheus import PrometheusError
from tokenfleet.autoscale.signals import SignalsQuery
from tokenfleet.controller.kube import ApiError, KubeClient
from tokenfleet.controller.prometheus_source import SignalSource

logger = logging.getLogger("tokenfleet.autoscaler")


def serving_plan(body: Mapping[str, Any]) -> dict[str, Any] | None:
    """status.plan.serving when the plan disaggregates, else None."""
    serving = ((body.get("status") or {}).get("plan") or {}).get("serving") or {}
    if serving.get("mode") != "disaggregated":
        return None
    return dict(serving)


def _roles(serving: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    return {str(r.get("role")): dict(r) for r in serving.get("roles") or []}


def current_prefill(body: Mapping[str, Any], serving: Mapping[str, Any], decode: int) -> int:
    """The prefill replicas running now: spec.serving.prefillReplicas, else what the render
    derives (render/roles.py: the ratio x the decode replicas, rounded up)."""
    fixed = ((body.get("spec") or {}).get("serving") or {}).get("prefillReplicas")
    if fixed is not None:
        return int(fixed)
    ratio = float(serving.get("prefillPerDecode") or 1.0)
    return 0 if decode <= 0 else max(1, -int(-decode * ratio // 1))


async def scale_prefill(
    kube: KubeClient,
    source: SignalSource,
    body: Mapping[str, Any],
    query: SignalsQuery,
    url: str,
    now: float,
    deadline: float,
    decode_replicas: int,
    decode_signal: str,
) -> list[dict[str, Any]] | None:
    """Decide and write the prefill pool; status.autoscaling.roles (None: not disaggregated)."""
    serving = serving_plan(body)
    if serving is None:
        return None
    roles = _roles(serving)
    prefill, decode = roles.get("prefill", {}), roles.get("decode", {})
    band = serving.get("prefillPerDecodeBand") or [0.0, 0.0]
    rate = wait = None
    try:
        async with asyncio.timeout(deadline):
            observed = await source.signals(dataclasses.replace(query, role="prefill"), url, now)
        rate = observed.signals.request_rate
        wait = observed.signals.queue_wait_quantile_seconds
    except (PrometheusError, TimeoutError) as error:
        logger.info("%s/%s: prefill signals: %s; held", query.namespace, query.llmservice, error)
    current = current_prefill(body, serving, decode_replicas)
    decision = prefill_replicas(
        PrefillInputs(
            current=current,
            decode=decode_replicas,
            request_rate=rate,
            queue_wait_seconds=wait,
            goodput_per_replica=float(prefill.get("goodputRequestsPerSecond") or 0.0),
            queue_wait_budget_seconds=float(prefill.get("queueWaitBudgetMs") or 0.0) / 1000,
            band=(float(band[0]), float(band[1])),
        )
    )
    fixed = ((body.get("spec") or {}).get("serving") or {}).get("prefillReplicas")
    if decision.replicas != current or fixed is None:
        meta = body.get("metadata") or {}
        patch = {"spec": {"serving": {"prefillReplicas": decision.replicas}}}
        try:
            await kube.patch(API_VERSION, KIND, str(meta["namespace"]), str(meta["name"]), patch)
        except ApiError as error:
            logger.warning("%s/%s: prefill replicas not written: %s", *query_key(query), error)
    return [
        {
            "role": "prefill",
            "replicas": decision.replicas,
            "goodputPerReplica": prefill.get("goodputRequestsPerSecond"),
            "signal": decision.reason[:500],
        },
        {
            "role": "decode",
            "replicas": decode_replicas,
            "goodputPerReplica": decode.get("goodputRequestsPerSecond"),
            "signal": decode_signal[:500],
        },
    ]


def query_key(query: SignalsQuery) -> tuple[str, str]:
    return query.namespace, query.llmservice
