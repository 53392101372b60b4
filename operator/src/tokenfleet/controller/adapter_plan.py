"""What to load or unload on each engine pod, when a pod counts as ready for its adapters, and
the status per adapter. Pure: controller/adapters.py does the I/O.

A pod's readiness gate (GATE) stays False until the pod has every adapter the spec lists,
so a new pod joins the Service and the InferencePool only once it can answer for all of
them. Once a pod incarnation has passed the gate it keeps it: an adapter added to the spec
later loads in the background on pods that keep serving the others (and the base model);
only a restarted engine container (its adapters are gone with its memory) waits again.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from tokenfleet.render.adapters import GATE  # the pods' readiness gate

GATE_REASON = "AdaptersLoaded"
# Retry after a failed load or unload of one adapter on one pod: seconds, by failures in a
# row, then the last one for ever (a file that appears, a Hub outage that ends).
BACKOFF_S = (5.0, 10.0, 20.0, 40.0, 80.0, 160.0, 300.0)
MAX_MESSAGE = 300
_RESTARTS = re.compile(r"^container restart (\d+):")


@dataclass(frozen=True)
class Wanted:
    name: str
    path: str  # what the engine loads: a path on the pod, or a Hub repo id
    pinned: bool = False


@dataclass(frozen=True)
class PodView:
    """One engine pod as the loop sees it."""

    name: str
    uid: str
    url: str | None  # http://podIP:port; None until the pod has an IP
    serving: bool  # the engine container is ready (its /health answers)
    restarts: int  # the engine container's restartCount
    gate: bool  # the readiness gate condition is True
    gate_restarts: int | None  # restart count recorded when the gate was set
    loaded: frozenset[str] | None = None  # adapters the engine lists; None: not asked / failed


@dataclass
class Failure:
    failures: int
    retry_at: float
    error: str
    delay: float = 0.0  # the backoff before the next attempt


@dataclass(frozen=True)
class Action:
    pod: str  # pod uid
    kind: str  # "load" | "unload"
    adapter: Wanted


@dataclass
class Attempts:
    """Failures per (pod uid, adapter, action) and when each may be tried again."""

    by_key: dict[tuple[str, str, str], Failure] = field(default_factory=dict)

    def due(self, pod: str, adapter: str, kind: str, now: float) -> bool:
        failure = self.by_key.get((pod, adapter, kind))
        return failure is None or failure.retry_at <= now

    def failed(self, pod: str, adapter: str, kind: str, error: str, now: float) -> Failure:
        key = (pod, adapter, kind)
        previous = self.by_key.get(key)
        count = previous.failures + 1 if previous else 1
        delay = BACKOFF_S[min(count - 1, len(BACKOFF_S) - 1)]
        failure = Failure(count, now + delay, one_line(error), delay)
        self.by_key[key] = failure
        return failure

    def succeeded(self, pod: str, adapter: str, kind: str) -> None:
        self.by_key.pop((pod, adapter, kind), None)

    def keep(self, pods: Iterable[str], adapters: Iterable[str]) -> None:
        """Forget pods that are gone and adapters no longer in play."""
        live, names = set(pods), set(adapters)
        self.by_key = {
            k: v
            for k, v in self.by_key.items()
            if k[0] in live and (k[1] in names or k[2] == "unload")
        }

    def failure(self, pod: str, adapter: str, kind: str) -> Failure | None:
        return self.by_key.get((pod, adapter, kind))


def one_line(text: str) -> str:
    line = " ".join(str(text).split())
    return line if len(line) <= MAX_MESSAGE else line[: MAX_MESSAGE - 3] + "..."


def actions(wanted: Iterable[Wanted], pod: PodView, attempts: Attempts, now: float) -> list[Action]:
    """Loads of the missing adapters, then unloads of the ones no longer wanted, on a serving
    pod whose adapters are known; those still backing off are left for later."""
    if not pod.serving or pod.url is None or pod.loaded is None:
        return []
    wanted = list(wanted)
    names = {w.name for w in wanted}
    out = [
        Action(pod.uid, "load", w)
        for w in wanted
        if w.name not in pod.loaded and attempts.due(pod.uid, w.name, "load", now)
    ]
    out += [
        Action(pod.uid, "unload", Wanted(name, ""))
        for name in sorted(pod.loaded - names)
        if attempts.due(pod.uid, name, "unload", now)
    ]
    return out


def gate_wanted(wanted: Iterable[Wanted], pod: PodView) -> bool | None:
    """The gate condition to write on `pod` (None: leave it as it is)."""
    if not pod.serving or pod.loaded is None:
        return None
    if pod.gate:
        if pod.gate_restarts is not None and pod.restarts > pod.gate_restarts:
            return False  # a restarted engine: its adapters went with it
        return None  # passed once: new adapters load in the background
    return {w.name for w in wanted} <= pod.loaded


def gate_message(pod: PodView, count: int) -> str:
    return f"container restart {pod.restarts}: {count} adapter(s) loaded"


def gate_restarts(message: str) -> int | None:
    match = _RESTARTS.match(message or "")
    return int(match.group(1)) if match else None


def adapter_status(
    wanted: Iterable[Wanted], pods: Iterable[PodView], attempts: Attempts
) -> list[dict[str, Any]]:
    """status.adapters: per adapter, on how many serving pods it is loaded, and why not."""
    serving = [p for p in pods if p.serving]
    out: list[dict[str, Any]] = []
    for w in wanted:
        known = [p for p in serving if p.loaded is not None]
        loaded = sum(1 for p in known if w.name in (p.loaded or frozenset()))
        entry: dict[str, Any] = {
            "name": w.name,
            "loadedReplicas": loaded,
            "replicas": len(serving),
        }
        failing = [
            (p, f)
            for p in serving
            if (f := attempts.failure(p.uid, w.name, "load")) is not None
            and w.name not in (p.loaded or frozenset())
        ]
        if not serving:
            entry["state"], entry["message"] = "Pending", "no engine pod is serving yet"
        elif loaded == len(serving):
            entry["state"], entry["message"] = "Loaded", f"loaded on {loaded} of {len(serving)}"
        elif failing:
            # The message changes with each attempt, not with each pass (a status write is
            # a watch event for every watcher).
            pod, failure = failing[0]
            entry["state"] = "Failed"
            entry["message"] = one_line(
                f"loaded on {loaded} of {len(serving)}; pod {pod.name}: {failure.error} "
                f"(attempt {failure.failures}, retrying in {failure.delay:.0f}s)"
            )
        else:
            entry["state"] = "Loading"
            entry["message"] = f"loaded on {loaded} of {len(serving)}"
        out.append(entry)
    return out


def pod_view(pod: Mapping[str, Any], container: str, port_name: str) -> PodView:
    """A pod object as the loop needs it (the engine container's port, readiness, restarts,
    and the gate condition)."""
    meta, spec, status = pod.get("metadata") or {}, pod.get("spec") or {}, pod.get("status") or {}
    port = None
    for c in spec.get("containers") or []:
        if c.get("name") == container:
            for p in c.get("ports") or []:
                if p.get("name") == port_name:
                    port = p.get("containerPort")
    ip = status.get("podIP")
    url = f"http://{ip}:{port}" if ip and isinstance(port, int) else None
    engine: Mapping[str, Any] = next(
        (c for c in status.get("containerStatuses") or [] if c.get("name") == container), {}
    )
    condition = next((c for c in status.get("conditions") or [] if c.get("type") == GATE), None)
    gate = condition is not None and condition.get("status") == "True"
    return PodView(
        name=str(meta.get("name", "")),
        uid=str(meta.get("uid") or meta.get("name", "")),
        url=url,
        serving=bool(engine.get("ready")) and not meta.get("deletionTimestamp"),
        restarts=int(engine.get("restartCount") or 0),
        gate=gate,
        gate_restarts=gate_restarts(str(condition.get("message", ""))) if condition else None,
    )


def gate_conditions(
    conditions: Iterable[Mapping[str, Any]], ready: bool, message: str, now: str
) -> list[dict[str, Any]]:
    """The pod's conditions with the gate set; the kubelet's own kept as they are."""
    kept = [dict(c) for c in conditions if c.get("type") != GATE]
    gate = {
        "type": GATE,
        "status": "True" if ready else "False",
        "reason": GATE_REASON if ready else "AdaptersLoading",
        "message": message,
        "lastTransitionTime": now,
    }
    return [*kept, gate]
