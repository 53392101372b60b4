"""The autoscaler's Kubernetes Events on an LLMService: a scale, a hold that starts or ends,
and the SLO's ceiling when the traffic puts it out of reach or back. Best effort: a failed
post is logged, never a failed tick."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

import kopf

from tokenfleet.autoscale.attainability import Ceiling
from tokenfleet.autoscale.types import Decision
from tokenfleet.controller.attainability import CONDITION as CEILING_CONDITION
from tokenfleet.controller.autoscaler_status import DATA_HOLDS, autoscaling_condition
from tokenfleet.controller.events import PostEvent


def post_decision(body: Mapping[str, Any], decision: Decision, previous: Mapping[str, Any]) -> None:
    """ScaledUp / ScaledDown on a change; AutoscalingHeld / AutoscalingResumed when the
    data-hold starts or ends (against the Autoscaling condition in `previous` status)."""
    if decision.direction != "none":
        reason = "ScaledUp" if decision.direction == "up" else "ScaledDown"
        message = f"replicas {decision.previous} -> {decision.desired}: {decision.reason}"
        _post(kopf.info, body, reason, message)
    was_held = _condition(previous, "Autoscaling").get("reason") == "Held"
    now_held = decision.held in DATA_HOLDS
    if now_held and not was_held:
        _post(kopf.warn, body, "AutoscalingHeld", autoscaling_condition(decision).message)
    elif was_held and not now_held:
        _post(kopf.info, body, "AutoscalingResumed", decision.reason)


def post_ceiling(
    body: Mapping[str, Any], ceiling: Ceiling | None, previous: Mapping[str, Any]
) -> None:
    """A Warning when the traffic starts to keep the SLO out of reach, a Normal one when
    it stops: the transition of the SLOAttainable condition."""
    if ceiling is None:
        return
    was_limited = _condition(previous, CEILING_CONDITION).get("status") == "False"
    if ceiling.limited and not was_limited:
        _post(kopf.warn, body, "SLOUnattainable", ceiling.message())
    elif was_limited and not ceiling.limited:
        _post(kopf.info, body, "SLOAttainable", ceiling.message())


def _condition(status: Mapping[str, Any], kind: str) -> Mapping[str, Any]:
    return next((c for c in status.get("conditions") or [] if c.get("type") == kind), {})


def _post(fn: PostEvent, body: Mapping[str, Any], reason: str, message: str) -> None:
    try:
        fn(body, reason=reason, message=message[:1000])
    except LookupError:  # outside kopf's context (a harness calling tick): log only
        logging.getLogger("tokenfleet.events").info("%s: %s", reason, message)
