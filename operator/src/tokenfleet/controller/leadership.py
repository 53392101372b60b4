"""Whether this replica is kopf's active peer, for everything kopf does not pause itself.

kopf (1.45, kopf/_core/engines/peering.py `process_peering_event`) pauses an operator whose
peering object lists a live peer of higher priority, or of the same priority: it turns on a
toggle of the `operator_paused` ToggleSet (kopf/_core/reactor/running.py `spawn_tasks`),
which stops the watch streams and the daemons. That toggle is internal: nothing in kopf's
public API tells handlers, and our own tasks (the autoscaler loops, the drift / resync
passes and the Events they post) kept running on a paused replica, so two replicas fought
over spec.replicas.

This gate reads the same peering object and applies the same rule with the same identity
and priority (both passed to kopf.run by commands/operator.py), every `interval` seconds.
It is a read (one GET per interval): a paused replica sends no write. It starts paused and
acts only after one successful read says it may; when the API cannot be read it keeps its
last answer (kopf, whose keep-alives fail too, does the same).

Chosen over exiting on a pause: a restarted pod draws a new random priority and may pause
the active one in turn, so exits would chain; pausing in place keeps one active replica.
"""

from __future__ import annotations

import asyncio
import datetime
import fnmatch
import logging
import os
import random
import re
import socket
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

import httpx

from tokenfleet.controller.kube import ApiError, KubeClient
from tokenfleet.controller.peering import PEERING_API, peering_plural

# Soon after kopf's own pause (it reacts to the peering watch at once); one GET per 2 s
# is little next to kopf's keep-alive patches.
CHECK_SECONDS = 2.0
log = logging.getLogger("tokenfleet.leadership")
EXACT = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")  # a namespace name, not a glob

Hook = Callable[[], Awaitable[None] | None]


def own_identity() -> str:
    """The peer id kopf is given: the pod's name where the chart sets POD_ID, as kopf's own
    detect_own_id does, else host/pid/random (unique per process)."""
    pod = os.environ.get("POD_ID")
    if pod:
        return pod
    suffix = "".join(random.choices("abcdefghijklmnopqrstuvwxyz0123456789", k=4))
    return f"{socket.gethostname()}/{os.getpid()}/{suffix}"


def _parse_time(text: Any) -> datetime.datetime | None:
    if not isinstance(text, str):
        return None
    try:
        parsed = datetime.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=datetime.UTC)


def blocking_peers(
    status: Mapping[str, Any], identity: str, priority: int, now: datetime.datetime
) -> list[str]:
    """The live peers kopf pauses this operator for: higher or equal priority, not itself.

    A peer is live until lastseen + lifetime (kopf's Peer.is_dead); one without lastseen
    counts as seen now, as in kopf."""
    blocking = []
    for peer_id, info in status.items():
        if peer_id == identity or not isinstance(info, Mapping):
            continue
        try:
            peer_priority = int(info.get("priority", 0))
            lifetime = datetime.timedelta(seconds=int(info.get("lifetime", 60)))
        except (TypeError, ValueError):
            continue
        seen = _parse_time(info.get("lastseen")) or now
        if seen + lifetime > now and peer_priority >= priority:
            blocking.append(peer_id)
    return sorted(blocking)


class Leadership:
    """`active` follows kopf's pause; hooks run on each change (pause first, then resume)."""

    def __init__(
        self,
        kube: KubeClient | None,
        *,
        peering: str | None,
        identity: str,
        priority: int,
        clusterwide: bool,
        namespaces: Sequence[str] = (),
        interval: float = CHECK_SECONDS,
    ) -> None:
        self.kube = kube
        self.peering = peering
        self.identity = identity
        self.priority = priority
        self.plural = peering_plural(clusterwide)
        # kopf keeps one KopfPeering per watched namespace and pauses on any of them.
        self.namespaces: tuple[str | None, ...] = (None,) if clusterwide else tuple(namespaces)
        self.interval = interval
        self.active = peering is None  # standalone: always
        self.reason = "standalone" if peering is None else "not checked yet"
        self._on_pause: list[Hook] = []
        self._on_resume: list[Hook] = []
        self._task: asyncio.Task[None] | None = None

    @classmethod
    def standalone(cls) -> Leadership:
        return cls(None, peering=None, identity="", priority=0, clusterwide=True)

    def on_pause(self, hook: Hook) -> None:
        self._on_pause.append(hook)

    def on_resume(self, hook: Hook) -> None:
        self._on_resume.append(hook)

    async def check(self) -> bool | None:
        """kopf's verdict now: True active, False paused, None unknown (read failed)."""
        assert self.kube is not None and self.peering is not None
        now = datetime.datetime.now(datetime.UTC)
        try:
            if not await self.kube.has_resource(PEERING_API, self.plural):
                self.reason = f"{self.plural}.kopf.dev is not installed"
                return False
            blocking: list[str] = []
            for body in await self._peerings():
                status = body.get("status") or {}
                blocking += blocking_peers(status, self.identity, self.priority, now)
        except (ApiError, httpx.HTTPError) as error:
            log.warning(
                "cannot read the peering %r: %s; keeping the last state", self.peering, error
            )
            return None
        self.reason = f"paused in favour of {blocking}" if blocking else "active"
        return not blocking

    async def _peerings(self) -> list[dict[str, Any]]:
        """The peering objects kopf watches: the cluster's one, or one per namespace (a
        glob like 'team-*' is matched against the KopfPeerings of every namespace)."""
        assert self.kube is not None and self.peering is not None
        if self.namespaces == (None,):
            body = await self.kube.get(PEERING_API, "ClusterKopfPeering", None, self.peering)
            return [body] if body else []
        exact = [ns for ns in self.namespaces if ns and EXACT.fullmatch(ns)]
        globs = [ns for ns in self.namespaces if ns and not EXACT.fullmatch(ns)]
        found = []
        for namespace in exact:
            body = await self.kube.get(PEERING_API, "KopfPeering", namespace, self.peering)
            found += [body] if body else []
        if globs:
            listing = await self.kube.list(PEERING_API, "KopfPeering", "", "")
            found += [
                body
                for body in listing
                if (body.get("metadata") or {}).get("name") == self.peering
                and any(
                    fnmatch.fnmatchcase(str(body["metadata"].get("namespace")), pattern)
                    for pattern in globs
                )
            ]
        return found

    async def set_active(self, active: bool) -> None:
        if active == self.active:
            return
        self.active = active
        for hook in self._on_resume if active else self._on_pause:
            result = hook()
            if result is not None:
                await result
        # Logged once the hooks ran: after "pausing", no pass of this replica is in flight.
        log.info(
            "%s: %s",
            "resuming the autoscalers, resync and drift correction"
            if active
            else "pausing the autoscalers, resync and drift correction",
            self.reason,
        )

    async def run(self) -> None:
        while True:
            try:
                verdict = await self.check()
            except Exception as error:  # not logged in yet (startup runs before login)
                log.debug("peering check: %s", error)
                verdict = None
            if verdict is not None:
                await self.set_active(verdict)
            await asyncio.sleep(self.interval)

    def start(self) -> None:
        if self.peering is not None and self._task is None:
            self._task = asyncio.create_task(self.run(), name="tokenfleet-leadership")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None
