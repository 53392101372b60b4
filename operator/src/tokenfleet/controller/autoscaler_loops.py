"""The autoscaler's loop manager: one asyncio task per LLMService with autoscaling enabled.

Started, restarted (any change of spec.autoscaling) and stopped from the LLMService watch
events (`sync`); each runs its tick on a fixed schedule of spec.autoscaling.intervalSeconds
(divided by --time-scale for simulated fleets), survives a failed tick, and waits for a
wake-up (`wake`) instead of a whole interval while its LLMService has no plan yet. Paused
while another replica is the active peer (controller/leadership.py). What a tick does is
the caller's (controller/autoscaler.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from tokenfleet.controller.kube import ApiError
from tokenfleet.controller.tasks import cancel_all

Key = tuple[str, str]
# spec.autoscaling.intervalSeconds' default (api/autoscaling.py), for bodies the API server
# has not defaulted (an older CRD).
DEFAULT_INTERVAL_SECONDS = 30.0
# After an unexpected error in a tick, wait at least this long before the next one.
ERROR_BACKOFF_SECONDS = 5.0


class Loops:
    def __init__(
        self,
        tick: Callable[[str, str], Awaitable[Any]],
        *,
        forget: Callable[[Key], None],
        release: Callable[[str, str], Awaitable[None]] | None,
        close: Callable[[], Awaitable[None]] | None,
        time_scale: float,
        logger: logging.Logger,
    ) -> None:
        self._tick = tick
        self._forget = forget  # the caller's memory of an LLMService whose loop is dropped
        self._release = release  # its Prometheus client, when its loop ends
        self._close = close  # every client, when all loops stop
        self._time_scale = time_scale
        self._logger = logger
        self._tasks: dict[Key, asyncio.Task[None]] = {}
        # (interval, spec.autoscaling as JSON): what each running loop was started with, and
        # what each LLMService wants (kept while paused).
        self._settings: dict[Key, tuple[float, str]] = {}
        self._wanted: dict[Key, tuple[float, str]] = {}
        # Loops whose last tick found nothing to decide on yet: woken by `wake`.
        self._waiting: dict[Key, asyncio.Event] = {}
        self.active = True

    def sync(self, event_type: str | None, body: Mapping[str, Any]) -> None:
        meta = body.get("metadata") or {}
        key = (str(meta.get("namespace") or ""), str(meta.get("name") or ""))
        auto = (body.get("spec") or {}).get("autoscaling") or {}
        if event_type == "DELETED" or meta.get("deletionTimestamp") or not auto.get("enabled"):
            self.drop(key)
            return
        interval = float(auto.get("intervalSeconds") or DEFAULT_INTERVAL_SECONDS)
        # Any change of spec.autoscaling restarts the loop (a fixed Prometheus URL revives a
        # loop stuck on the old one); a status or replicas change does not.
        setting = (interval, json.dumps(auto, sort_keys=True, default=str))
        self._wanted[key] = setting
        if not self.active:
            return  # another replica acts; resume() starts it
        task = self._tasks.get(key)
        if task is not None and not task.done() and self._settings.get(key) == setting:
            self.wake(key)
            return
        if task is not None:
            task.cancel()
        self._settings[key] = setting
        self._tasks[key] = asyncio.create_task(self._loop(key, interval))

    def waiting(self, key: Key, waits: bool) -> None:
        """Whether the loop of `key` waits for a wake-up rather than its next interval."""
        if waits:
            self._waiting.setdefault(key, asyncio.Event())
        else:
            self._waiting.pop(key, None)

    def wake(self, key: Key) -> None:
        wake = self._waiting.get(key)
        if wake is not None:
            wake.set()

    async def pause(self) -> None:
        """Stop every loop and close the clients; the loops wanted are kept."""
        self.active = False
        await self.stop()
        self._settings.clear()
        self._waiting.clear()

    def resume(self) -> None:
        self.active = True
        for (namespace, name), (_, auto) in sorted(self._wanted.items()):
            body = {
                "metadata": {"namespace": namespace, "name": name},
                "spec": {"autoscaling": json.loads(auto)},
            }
            self.sync("MODIFIED", body)

    def running(self) -> set[Key]:
        return {key for key, task in self._tasks.items() if not task.done()}

    async def stop(self) -> None:
        await cancel_all(self._tasks)
        if self._close is not None:
            await self._close()

    def drop(self, key: Key) -> None:
        """No loop, and nothing remembered, for `key` (deleted, or autoscaling off)."""
        task = self._tasks.pop(key, None)
        if task is not None and task is not asyncio.current_task():
            task.cancel()
        for memory in (self._settings, self._wanted, self._waiting):
            memory.pop(key, None)
        self._forget(key)

    async def _loop(self, key: Key, interval: float) -> None:
        me = asyncio.current_task()
        try:
            await self._run(key, interval, me)
        finally:
            if self._tasks.get(key) in (None, me):  # not replaced by a restarted loop
                self._tasks.pop(key, None)
                if self._release is not None:
                    await asyncio.shield(self._release(*key))

    async def _run(self, key: Key, interval: float, me: asyncio.Task[Any] | None) -> None:
        loop = asyncio.get_running_loop()
        while self._tasks.get(key) is me:
            delay = interval
            started = loop.time()
            try:
                await self._tick(*key)
            except asyncio.CancelledError:
                raise
            except ApiError as error:  # the apiserver is unwell or refused: try next tick
                self._logger.warning("%s/%s: autoscaling tick: %s", *key, error)
                delay = max(interval, ERROR_BACKOFF_SECONDS)
            except Exception:  # a bug: log it with its traceback, keep the loop alive
                self._logger.exception("%s/%s: autoscaling tick failed", *key)
                delay = max(interval, ERROR_BACKOFF_SECONDS)
            if self._tasks.get(key) is not me:
                return
            pause = until_next_tick(started, loop.time(), delay / self._time_scale)
            wake = self._waiting.get(key)
            if wake is None:
                await asyncio.sleep(pause)
                continue
            wake.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(wake.wait(), pause)


def until_next_tick(started: float, now: float, period: float) -> float:
    """Seconds to wait so ticks start every `period` (a fixed schedule): the tick's own
    time counts, so a 5 s interval ticks every 5 s, not every 5 s plus the tick. A tick
    longer than its period is followed at once, never by a burst of missed ones."""
    return max(0.0, started + period - now)
