"""Where the replicas of a spec.gpu.type auto fleet go when the chosen type runs out. Pure.

The planner ranks the candidate types (capacity/gpu_choice.py); `decide` fills the wanted
replicas into them in that order, each type up to what it can hold:
- a type whose engine pods stayed Unschedulable for want of its GPU for
  `unschedulable_seconds` is *short*: it keeps the replicas that were scheduled then (they
  serve) and new replicas go to the next type, re-planned for it (its own Plan);
- a candidate's maxCount caps it (maxCount GPUs // GPUs per replica) and the rest spills over;
- after `dwell_seconds` a short type gets one more replica as a probe. When that probe is
  scheduled, the type is back (open): new replicas return to it, and the fallback type's
  replicas are released as the preferred type's become ready. A probe that stays
  Unschedulable for `unschedulable_seconds` restarts the dwell (no flapping: one move away
  per unschedulable deadline, one try back per dwell);
- serving replicas are never drained for a move: a type whose fill went down keeps its ready
  replicas while replicas placed elsewhere are not ready yet (a surge, not a gap);
- replicas no type can take (every candidate short or at its maxCount) wait on the first
  type not at its maxCount: Pending pods there are what a cluster autoscaler provisions for.

The controller observes the pods (`observe`), keeps `TypeState` in status.gpu.placement
across reconciles and operator restarts, and applies `Placement.split`.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal

Reason = Literal["Unschedulable", "MaxCount"]


@dataclass(frozen=True)
class Candidate:
    """A usable type in the planner's order; `max_replicas` from its maxCount (None: no cap)."""

    gpu: str
    max_replicas: int | None = None


@dataclass(frozen=True)
class TypeObserved:
    """One type's engine replicas as the cluster shows them."""

    desired: int = 0  # its workload's spec.replicas (0: none rendered)
    scheduled: int = 0  # replicas whose pod is bound to a node
    ready: int = 0
    # Earliest lastTransitionTime of a pod of this type Unschedulable for want of its GPU.
    unschedulable_since: float | None = None
    unschedulable_message: str = ""
    pending: int = 0  # replicas whose pod is not bound to a node yet


@dataclass(frozen=True)
class TypeState:
    """What the fallback remembers of a type (status.gpu.placement[])."""

    gpu: str
    short_since: float | None = None  # None: open
    held: int = 0  # replicas it holds while short (scheduled when it turned short)
    reason: str = ""  # why it is short, for the condition


@dataclass(frozen=True)
class Settings:
    unschedulable_seconds: float = 300.0
    dwell_seconds: float = 600.0
    # A pod not bound yet and not (yet) marked Unschedulable: look again this soon.
    poll_seconds: float = 15.0


DEFAULTS = Settings()


@dataclass(frozen=True)
class Event:
    warning: bool
    reason: str
    message: str


@dataclass(frozen=True)
class Placement:
    split: dict[str, int]  # GPU id -> replicas, in the candidates' order (0: none)
    states: tuple[TypeState, ...]
    growth: str | None  # where the next replica would go (None: nowhere left)
    fallback: Reason | None  # why growth is not on the preferred type (None: it is)
    message: str
    events: tuple[Event, ...] = ()
    next_check_seconds: float | None = None  # when a deadline or a dwell comes due


def _transition(
    c: Candidate, seen: TypeObserved, old: TypeState, now: float, s: Settings
) -> tuple[TypeState, Event | None]:
    """A type's state after this observation, and the Event of a change."""
    pending_for = None if seen.unschedulable_since is None else now - seen.unschedulable_since
    expired = pending_for is not None and pending_for >= s.unschedulable_seconds
    if old.short_since is None:
        if not expired:
            return old, None
        why = seen.unschedulable_message or "Unschedulable"
        new = TypeState(c.gpu, now, seen.scheduled, why)
        text = (
            f"{c.gpu}: engine pods Unschedulable for {pending_for:.0f}s ({why}); "
            f"{seen.scheduled} replica(s) keep serving on it, new replicas go to the next "
            "candidate"
        )
        return new, Event(True, "GpuUnavailable", text)
    probing = now - old.short_since >= s.dwell_seconds
    if probing and seen.scheduled > old.held:
        text = f"{c.gpu}: a replica scheduled again; new replicas return to it"
        return TypeState(c.gpu), Event(False, "GpuAvailable", text)
    if expired and (probing or seen.scheduled < old.held):
        # The probe found no room (the dwell starts again), or nodes went away.
        return replace(old, short_since=now if probing else old.short_since,
                       held=min(old.held, seen.scheduled)), None  # fmt: skip
    return old, None


def _caps(
    candidates: Sequence[Candidate], states: Mapping[str, TypeState], now: float, s: Settings
) -> dict[str, float]:
    caps: dict[str, float] = {}
    for c in candidates:
        cap: float = math.inf if c.max_replicas is None else c.max_replicas
        st = states[c.gpu]
        if st.short_since is not None:
            probe = 1 if now - st.short_since >= s.dwell_seconds else 0
            cap = min(cap, st.held + probe)
        caps[c.gpu] = cap
    return caps


def _fill(
    candidates: Sequence[Candidate], caps: Mapping[str, float], wanted: int
) -> dict[str, int]:
    split = {c.gpu: 0 for c in candidates}
    left = wanted
    for c in candidates:
        take = int(min(left, caps[c.gpu]))
        split[c.gpu] = take
        left -= take
    if left > 0:  # every type short or capped: wait where a maxCount still allows
        room = [c for c in candidates if c.max_replicas is None or split[c.gpu] < c.max_replicas]
        if room:
            c = room[0]
            extra = left if c.max_replicas is None else min(left, c.max_replicas - split[c.gpu])
            split[c.gpu] += extra
    return split


def _keep_serving(
    candidates: Sequence[Candidate], split: dict[str, int], seen: Mapping[str, TypeObserved]
) -> dict[str, int]:
    """Ready replicas above a type's fill stay while replicas placed elsewhere start."""
    starting = sum(max(0, split[c.gpu] - seen[c.gpu].ready) for c in candidates)
    out = dict(split)
    for c in reversed(candidates):
        if starting <= 0:
            break
        o = seen[c.gpu]
        surplus = max(0, min(o.desired, o.ready) - split[c.gpu])
        keep = min(surplus, starting)
        out[c.gpu] += keep
        starting -= keep
    return out


def decide(
    candidates: Sequence[Candidate],
    wanted: int,
    observed: Mapping[str, TypeObserved],
    previous: Iterable[TypeState],
    now: float,
    settings: Settings = DEFAULTS,
    previous_growth: str | None = None,
) -> Placement:
    """The replicas per type for `wanted` replicas in all, and what changed since the
    `previous` states (and `previous_growth`, the type new replicas went to)."""
    if not candidates:
        raise ValueError("no candidate GPU type")
    before = {st.gpu: st for st in previous}
    seen = {c.gpu: observed.get(c.gpu, TypeObserved()) for c in candidates}
    states: dict[str, TypeState] = {}
    events: list[Event] = []
    for c in candidates:
        state, event = _transition(
            c, seen[c.gpu], before.get(c.gpu, TypeState(c.gpu)), now, settings
        )
        states[c.gpu] = state
        if event is not None:
            events.append(event)
    caps = _caps(candidates, states, now, settings)
    split = _keep_serving(candidates, _fill(candidates, caps, wanted), seen)
    growth = next((c.gpu for c in candidates if split[c.gpu] < caps[c.gpu]), None)
    preferred = candidates[0].gpu
    fallback: Reason | None = None
    if growth != preferred:
        fallback = "Unschedulable" if states[preferred].short_since is not None else "MaxCount"
    message = _message(candidates, states, split, growth, fallback)
    if fallback == "MaxCount" and growth != previous_growth:
        events.append(Event(True, "GpuMaxCount", message))
    return Placement(
        split,
        tuple(states[c.gpu] for c in candidates),
        growth,
        fallback,
        message,
        tuple(events),
        _next_check(candidates, states, seen, now, settings),
    )


def _message(
    candidates: Sequence[Candidate],
    states: Mapping[str, TypeState],
    split: Mapping[str, int],
    growth: str | None,
    fallback: Reason | None,
) -> str:
    where = ", ".join(f"{split[c.gpu]} on {c.gpu}" for c in candidates if split[c.gpu])
    where = where or "no replicas"
    if fallback is None:
        return f"new replicas go to the preferred type {candidates[0].gpu} ({where})"
    short = [f"{c.gpu} ({states[c.gpu].reason})" for c in candidates if states[c.gpu].short_since]
    capped = [c.gpu for c in candidates if c.max_replicas is not None
              and split[c.gpu] >= c.max_replicas]  # fmt: skip
    why = "; ".join(
        ([f"unavailable: {', '.join(short)}"] if short else [])
        + ([f"at maxCount: {', '.join(capped)}"] if capped else [])
    )
    target = f"new replicas go to {growth}" if growth else "no candidate has room"
    return f"{target} ({where}); {why}"


def _next_check(
    candidates: Sequence[Candidate],
    states: Mapping[str, TypeState],
    seen: Mapping[str, TypeObserved],
    now: float,
    s: Settings,
) -> float | None:
    """Seconds until a deadline or a dwell comes due (the controller looks again then)."""
    due: list[float] = []
    for c in candidates:
        o, st = seen[c.gpu], states[c.gpu]
        if o.unschedulable_since is not None:
            due.append(o.unschedulable_since + s.unschedulable_seconds - now)
        elif o.pending:
            due.append(min(s.poll_seconds, s.unschedulable_seconds))
        if st.short_since is not None:
            due.append(st.short_since + s.dwell_seconds - now)
    future = [d for d in due if d > 0]
    return min(future) if future else None


# --- reading pods -------------------------------------------------------------------------


def lacks_gpu(message: str) -> bool:
    """Whether the scheduler's reason names a missing resource or no matching node (the GPU
    type's nodes are full or absent), not e.g. an unbound claim, which no type fixes."""
    text = message.lower()
    return (
        "insufficient" in text or "node affinity/selector" in text or "node(s) didn't match" in text
    )


def observe(
    pods: Iterable[Mapping[str, Any]], type_label: str, parse_time: Any
) -> dict[str, TypeObserved]:
    """Per GPU type (the pods' `type_label`), from engine pods: scheduled and ready replicas
    (servers and leaders) and since when a pod is Unschedulable for want of its GPU.
    `parse_time(text) -> float | None` reads a condition's lastTransitionTime."""
    counts: dict[str, dict[str, Any]] = {}
    for pod in pods:
        meta = pod.get("metadata") or {}
        if meta.get("deletionTimestamp"):
            continue
        gpu = (meta.get("labels") or {}).get(type_label)
        if not gpu:
            continue
        c = counts.setdefault(
            gpu, {"scheduled": 0, "ready": 0, "since": None, "why": "", "pending": 0}
        )
        conditions = {k.get("type"): k for k in (pod.get("status") or {}).get("conditions") or []}
        serving = (meta.get("labels") or {}).get("tokenfleet.dev/role") in ("server", "leader")
        if serving and (pod.get("spec") or {}).get("nodeName"):
            c["scheduled"] += 1
        elif serving:
            c["pending"] += 1
        if serving and (conditions.get("Ready") or {}).get("status") == "True":
            c["ready"] += 1
        sched = conditions.get("PodScheduled") or {}
        message = str(sched.get("message") or "")
        if (
            sched.get("status") == "False"
            and sched.get("reason") == "Unschedulable"
            and lacks_gpu(message)
        ):
            at = parse_time(sched.get("lastTransitionTime"))
            if at is not None and (c["since"] is None or at < c["since"]):
                c["since"], c["why"] = at, message[:200]
    return {
        gpu: TypeObserved(0, c["scheduled"], c["ready"], c["since"], c["why"], c["pending"])
        for gpu, c in counts.items()
    }
