"""The reconciler's kept plan of an LLMService body, as the autoscaler's helpers get it."""

from __future__ import annotations

from typing import Any

from tokenfleet.api import parse_llmservice, plan_service, to_plan_request
from tokenfleet.controller.plans import KeptPlan


def kept_plan(body: dict[str, Any]) -> KeptPlan:
    meta = body["metadata"]
    plan = plan_service(to_plan_request(parse_llmservice(body)))
    return KeptPlan(str(meta["uid"]), int(meta["generation"]), "", plan)
