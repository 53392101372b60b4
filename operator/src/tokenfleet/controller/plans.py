"""One plan per LLMService generation: the reconciler's, kept for everyone else.

The reconciler plans an LLMService from its spec and the model config it resolved (a
ConfigMap included) and keeps the plan once its workload is applied and reported, per
(uid, generation, config); later passes of that generation (drift, resync) reuse it, and
the autoscaler, the SLO ceiling (attainability.py) and the prefix feed (prefix_feed.py)
read it, typed. Nothing else in the operator plans an
LLMService; what those helpers ask of the planner is this plan at another workload, its
layout pinned (capacity/pinned.py).

One entry per LLMService (a newer generation replaces the older), dropped when it is
deleted: bounded by the LLMServices that exist (about 6 KiB each).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from tokenfleet.capacity.types import Plan

Key = tuple[str, str]  # (namespace, name)


@dataclass(frozen=True)
class KeptPlan:
    uid: str
    generation: int
    config: str  # digest of the resolved model config ("" when the spec holds it)
    plan: Plan

    @property
    def predicted_goodput(self) -> float:
        """Requests per second one replica serves within the SLO, as status.plan shows it
        (api/status.py rounds it to 3 digits): the autoscaler's feed-forward."""
        return round(self.plan.predicted.goodput_requests_per_second, 3)


def config_digest(config: Mapping[str, Any] | None) -> str:
    if config is None:
        return ""
    text = json.dumps(config, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


class Plans:
    def __init__(self) -> None:
        self._kept: dict[Key, KeptPlan] = {}
        self._listeners: list[Callable[[Key], None]] = []

    def on_keep(self, listener: Callable[[Key], None]) -> None:
        """Called with the key whenever a plan is kept (the autoscaler's wake-up)."""
        self._listeners.append(listener)

    def keep(self, key: Key, uid: str, generation: int, config: str, plan: Plan) -> None:
        current = self._kept.get(key)
        if current is not None and current.uid == uid and current.generation > generation:
            return  # a pass of an older generation finished late: keep the newer plan
        self._kept[key] = KeptPlan(uid, generation, config, plan)
        for listener in self._listeners:
            listener(key)

    def kept(self, key: Key, uid: str, generation: int, config: str) -> Plan | None:
        """The plan of exactly this generation and config, for the reconciler's next pass."""
        found = self._kept.get(key)
        if found is None or (found.uid, found.generation, found.config) != (
            uid,
            generation,
            config,
        ):
            return None
        return found.plan

    def latest(self, key: Key, uid: str) -> KeptPlan | None:
        """The newest plan of this LLMService (by uid): what its workload was applied with."""
        found = self._kept.get(key)
        return found if found is not None and found.uid == uid else None

    def forget(self, key: Key) -> None:
        self._kept.pop(key, None)

    def __len__(self) -> int:
        return len(self._kept)
