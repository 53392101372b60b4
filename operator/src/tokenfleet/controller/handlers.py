"""kopf wiring: which events lead to a reconcile. No logic of its own.

- LLMService created / changed / seen at startup -> reconcile (kopf retries TemporaryError).
- A change to an object we own (someone edits or deletes the Deployment, or its status
  moves) -> wake that LLMService's drift daemon, which re-reads the LLMService and
  reconciles. Echoes of our own writes are recognised by resourceVersion and ignored.
- The same daemon re-reconciles every `resync_seconds` as a safety net for missed events.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import kopf

from tokenfleet.controller.kube import PLURALS, ApiError, KubeClient
from tokenfleet.controller.reconcile import (
    API_VERSION,
    GROUP,
    INSTANCE_LABEL,
    KIND,
    MANAGED_BY,
    PLURAL,
    VERSION,
    Reconciler,
)

# (group/version, plural) of every kind render may produce; kopf skips the absent ones.
OWNED_RESOURCES = (
    ("apps/v1", "deployments"),
    ("v1", "services"),
    ("policy/v1", "poddisruptionbudgets"),
    ("v1", "persistentvolumeclaims"),
    ("leaderworkerset.x-k8s.io/v1", "leaderworkersets"),
    ("monitoring.coreos.com/v1", "podmonitors"),
)
KIND_OF = {plural: kind for kind, plural in PLURALS.items()}
PREFIX = "tokenfleet.dev"


@dataclass(frozen=True)
class Options:
    resync_seconds: float = 600.0
    watch_server_timeout: float = 300.0


class Triggers:
    """One asyncio.Event per LLMService: set when an owned object changed."""

    def __init__(self) -> None:
        self._events: dict[tuple[str, str], asyncio.Event] = {}

    def get(self, namespace: str, name: str) -> asyncio.Event:
        return self._events.setdefault((namespace, name), asyncio.Event())

    def fire(self, namespace: str, name: str) -> None:
        self.get(namespace, name).set()

    def drop(self, namespace: str, name: str) -> None:
        self._events.pop((namespace, name), None)


class Credentials:
    """The connection kopf logged in with, shared with our own client (and renewed on 401)."""

    def __init__(self) -> None:
        self.info: kopf.ConnectionInfo | None = None
        self._kwargs: dict[str, Any] = {}

    def login(self, **kwargs: Any) -> kopf.ConnectionInfo | None:
        self._kwargs = kwargs
        # The same order as kopf's defaults: the official client (kubeconfig incl. exec
        # plugins, or in-cluster), then kopf's minimal service-account / kubeconfig readers.
        info = (
            kopf.login_via_client(**kwargs)
            or kopf.login_with_service_account(**kwargs)
            or kopf.login_with_kubeconfig(**kwargs)
        )
        self.info = info
        return info

    async def current(self, renew: bool = False) -> kopf.ConnectionInfo:
        if renew and self._kwargs:
            # After a 401: the token was probably rotated; resolve it again off the loop.
            await asyncio.to_thread(self.login, **self._kwargs)
        if self.info is None:
            raise kopf.TemporaryError("not logged in to Kubernetes yet", delay=1)
        return self.info


def configure_settings(settings: kopf.OperatorSettings, options: Options) -> None:
    # Handler progress and the last-handled spec live in annotations: status is ours alone.
    settings.persistence.progress_storage = kopf.AnnotationsProgressStorage(prefix=PREFIX)
    settings.persistence.diffbase_storage = kopf.AnnotationsDiffBaseStorage(
        prefix=PREFIX, key="last-handled-configuration"
    )
    settings.persistence.finalizer = f"{PREFIX}/finalizer"  # unused: no delete handlers
    # Only warnings and errors of kopf's own logs become Events; our transitions are
    # posted explicitly (Planned, Applied, Degraded, Ready, DriftCorrected).
    settings.posting.level = logging.WARNING
    # Ask the apiserver to end watches periodically and never wait on a dead connection.
    settings.watching.server_timeout = options.watch_server_timeout
    settings.watching.client_timeout = options.watch_server_timeout + 60
    settings.watching.connect_timeout = 30
    settings.networking.request_timeout = 60
    settings.networking.connect_timeout = 30
    settings.batching.error_delays = (1, 2, 5, 10, 30, 60)


def build_registry(
    reconciler: Reconciler,
    credentials: Credentials,
    options: Options | None = None,
) -> kopf.OperatorRegistry:
    options = options or Options()
    registry = kopf.OperatorRegistry()
    triggers = Triggers()
    kube: KubeClient = reconciler.kube

    @kopf.on.startup(registry=registry)
    def configure(settings: kopf.OperatorSettings, **_: Any) -> None:
        configure_settings(settings, options)

    @kopf.on.login(registry=registry)
    def login(**kwargs: Any) -> kopf.ConnectionInfo | None:
        return credentials.login(**kwargs)

    @kopf.on.cleanup(registry=registry)
    async def close(**_: Any) -> None:
        await kube.close()

    @kopf.on.resume(GROUP, VERSION, PLURAL, registry=registry)
    @kopf.on.create(GROUP, VERSION, PLURAL, registry=registry)
    @kopf.on.update(GROUP, VERSION, PLURAL, registry=registry)
    async def reconcile(body: kopf.Body, logger: kopf.Logger, **_: Any) -> None:
        await reconciler.reconcile(body, logger)

    @kopf.daemon(GROUP, VERSION, PLURAL, registry=registry, cancellation_timeout=1.0)
    async def drift(
        namespace: str | None, name: str, logger: kopf.Logger, stopped: kopf.DaemonStopped, **_: Any
    ) -> None:
        namespace = namespace or ""
        trigger = triggers.get(namespace, name)
        delay = 1.0
        try:
            while not stopped:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(trigger.wait(), timeout=options.resync_seconds)
                trigger.clear()
                if stopped:
                    break
                try:
                    body = await kube.get(API_VERSION, KIND, namespace, name)
                    if body is None or body["metadata"].get("deletionTimestamp"):
                        break
                    await reconciler.reconcile(body, logger)
                    delay = 1.0
                except (kopf.TemporaryError, ApiError) as error:
                    logger.warning("drift reconcile will retry in %.0fs: %s", delay, error)
                    await asyncio.sleep(delay)
                    delay = min(delay * 2, 60.0)
                    trigger.set()
        finally:
            triggers.drop(namespace, name)
            reconciler.forget(namespace, name)

    for group_version, plural in OWNED_RESOURCES:
        _watch_owned(registry, reconciler, triggers, group_version, plural)
    return registry


def _watch_owned(
    registry: kopf.OperatorRegistry,
    reconciler: Reconciler,
    triggers: Triggers,
    group_version: str,
    plural: str,
) -> None:
    group, _, version = group_version.rpartition("/")
    kind = KIND_OF.get(plural, plural)

    @kopf.on.event(
        group, version, plural, id=f"owned-{plural}", labels=MANAGED_BY, registry=registry
    )
    async def owned_changed(
        event: Mapping[str, Any], body: kopf.Body, namespace: str | None, name: str, **_: Any
    ) -> None:
        if event.get("type") is None:
            return  # the initial listing: resume handlers reconcile everything anyway
        owner = body.get("metadata", {}).get("labels", {}).get(INSTANCE_LABEL)
        if not owner:
            return
        rv = str(body.get("metadata", {}).get("resourceVersion", ""))
        if event.get("type") != "DELETED" and reconciler.is_own_echo(
            kind, namespace or "", name, rv
        ):
            return
        triggers.fire(namespace or "", owner)
