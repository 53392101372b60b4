"""kopf wiring: which events lead to a reconcile. No logic of its own.

- LLMService created / changed / seen at startup -> reconcile (kopf retries TemporaryError).
- A change to an object we own (someone edits or deletes the Deployment, or its status
  moves) -> Drift re-reads that LLMService and reconciles. Echoes of our own writes are
  recognised by resourceVersion and ignored.
- Drift also re-reconciles every known LLMService every `resync_seconds` (missed events).
- Every LLMService watch event (deletion included) -> Autoscalers.sync: one autoscaler loop
  per LLMService with spec.autoscaling.enabled, none otherwise (controller/autoscaler.py);
  a deletion also stops the reconcile in flight for it before its next write.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import kopf

from tokenfleet.api import GROUP, PLURAL, VERSION
from tokenfleet.controller.adapters import AdapterLoaders
from tokenfleet.controller.autoscaler import AutoscalerOptions, Autoscalers
from tokenfleet.controller.kube import PLURALS, ApiError, KubeClient
from tokenfleet.controller.leadership import Leadership
from tokenfleet.controller.reconcile import INSTANCE_LABEL, MANAGED_BY, Reconciler

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
PREFIX = GROUP  # kopf's annotations and finalizer under the API group


# Degraded reasons that another object can resolve without a spec change (NameConflict:
# the other LLMService or the namesake may be deleted).
WAITING_REASONS = frozenset(
    {"LeaderWorkerSetMissing", "ConfigMapNotFound", "ConfigMapKeyMissing", "NameConflict"}
)


@dataclass(frozen=True)
class Options:
    resync_seconds: float = 600.0
    recheck_seconds: float = 60.0  # for WAITING_REASONS
    watch_server_timeout: float = 300.0
    prometheus_url: str | None = None  # --prometheus-url: the autoscaler's default source
    # --allow-prometheus: URLs a spec may name (None: only prometheus_url)
    allowed_prometheus: tuple[str, ...] | None = None
    metrics_window_seconds: float = 60.0  # autoscale/signals.py DEFAULT_WINDOW_SECONDS
    time_scale: float = 1.0  # --time-scale: simulated fleets only (controller/timescale.py)
    namespaces: tuple[str, ...] = ()  # --namespace: watched ones (empty: every namespace)


class Drift:
    """Re-reconciles an LLMService when an object it owns changed, and resyncs periodically.

    One task per LLMService at a time; a change arriving while it runs schedules exactly
    one more pass. The LLMService is re-read first, so a pass always uses the latest spec.
    Deliberately not a kopf daemon: daemons need a finalizer on every LLMService, which
    would block `kubectl delete` whenever the operator is down.
    """

    def __init__(
        self, reconciler: Reconciler, resync_seconds: float, recheck_seconds: float = 60.0
    ) -> None:
        self._reconciler = reconciler
        self._resync_seconds = resync_seconds
        self._recheck_seconds = recheck_seconds
        self._tasks: dict[tuple[str, str], asyncio.Task[None]] = {}
        self._again: set[tuple[str, str]] = set()
        self._timers: dict[tuple[str, str], asyncio.TimerHandle] = {}
        self._known: set[tuple[str, str]] = set()
        # kopf's per-object context (it carries the queue kopf.info() posts Events to).
        self._context: contextvars.Context | None = None
        self._resync: asyncio.Task[None] | None = None
        self._logger = logging.getLogger("tokenfleet.drift")
        # Off while another replica is kopf's active peer (controller/leadership.py): no
        # pass starts, and what is known is passed over once this replica resumes.
        self.active = True

    def track(self, namespace: str, name: str) -> None:
        self._known.add((namespace, name))
        self._context = contextvars.copy_context()

    def fire(self, namespace: str, name: str) -> None:
        key = (namespace, name)
        if not self.active:
            return
        task = self._tasks.get(key)
        if task is not None and not task.done():
            self._again.add(key)
            return
        context = contextvars.copy_context() if self._context is None else None
        self._tasks[key] = asyncio.create_task(self._run(key), context=context or self._context)

    def later(self, namespace: str, name: str, delay: float) -> None:
        """Fire once after `delay`, replacing any recheck already pending for this object:
        one timer per LLMService, however many reconciles ended waiting."""
        key = (namespace, name)
        pending = self._timers.pop(key, None)
        if pending is not None:
            pending.cancel()
        self._timers[key] = asyncio.get_running_loop().call_later(delay, self._due, key)

    def _due(self, key: tuple[str, str]) -> None:
        self._timers.pop(key, None)
        self.fire(*key)

    @property
    def pending_rechecks(self) -> frozenset[tuple[str, str]]:
        return frozenset(self._timers)

    def after(self, namespace: str, name: str, status: Mapping[str, Any]) -> None:
        """Degraded while waiting on something else (a CRD, a ConfigMap), or a GPU type's
        deadline or dwell coming due (spec.gpu.type auto): look again then."""
        delays = []
        for cond in status.get("conditions") or []:
            degraded = cond.get("type") == "Degraded" and cond.get("status") == "True"
            if degraded and cond.get("reason") in WAITING_REASONS:
                delays.append(self._recheck_seconds)
        gpu = self._reconciler.recheck_in(namespace, name)
        if gpu is not None:
            delays.append(gpu)
        if delays:
            self.later(namespace, name, min(delays))

    def start(self) -> None:
        self._resync = asyncio.create_task(self._resync_loop())

    async def pause(self) -> None:
        """Stop every pass and recheck now: another replica acts."""
        self.active = False
        for timer in self._timers.values():
            timer.cancel()
        self._timers.clear()
        self._again.clear()
        tasks = list(self._tasks.values())
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    def resume(self) -> None:
        """Active again: one pass over every known LLMService (what changed meanwhile)."""
        self.active = True
        for namespace, name in sorted(self._known):
            self.fire(namespace, name)

    async def stop(self) -> None:
        for timer in self._timers.values():
            timer.cancel()
        self._timers.clear()
        tasks = [*self._tasks.values(), *([self._resync] if self._resync else [])]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    async def _resync_loop(self) -> None:
        while True:
            await asyncio.sleep(self._resync_seconds)
            for namespace, name in sorted(self._known):
                self.fire(namespace, name)

    async def _run(self, key: tuple[str, str]) -> None:
        namespace, name = key
        delay = 1.0
        try:
            while True:
                self._again.discard(key)
                try:
                    status = await self._reconciler.reconcile(
                        {"metadata": {"namespace": namespace, "name": name}}, self._logger
                    )
                    if status is None:  # deleted: forget it
                        self._known.discard(key)
                        timer = self._timers.pop(key, None)
                        if timer is not None:
                            timer.cancel()
                        self._reconciler.forget(namespace, name)
                        return
                    self.after(namespace, name, status)
                    delay = 1.0
                except Exception as error:
                    # Transient API errors, and bugs too: a dropped pass would leave drift
                    # uncorrected until the next resync. The reconciler's backoff (per
                    # LLMService and error) when it gave one.
                    given = error.delay if isinstance(error, kopf.TemporaryError) else None
                    wait = float(given) if given else delay
                    if isinstance(error, (kopf.TemporaryError, ApiError)):
                        self._logger.warning(
                            "%s/%s: retry in %.0fs: %s", namespace, name, wait, error
                        )
                    else:
                        self._logger.exception(
                            "%s/%s: drift reconcile failed; retry in %.0fs", namespace, name, wait
                        )
                    await asyncio.sleep(wait)
                    delay = min(delay * 2, 60.0)
                    self._again.add(key)
                if key not in self._again:
                    return
        finally:
            if self._tasks.get(key) is asyncio.current_task():
                self._tasks.pop(key, None)


class Credentials:
    """The connection kopf logged in with, shared with our own client (and renewed on 401)."""

    def __init__(self) -> None:
        self.info: kopf.ConnectionInfo | None = None
        self._kwargs: dict[str, Any] = {}

    def login(self, **kwargs: Any) -> kopf.ConnectionInfo | None:
        self._kwargs = kwargs
        # The same order as kopf's defaults: the official client (kubeconfig incl. exec
        # plugins, or in-cluster), then kopf's minimal service-account / kubeconfig readers.
        try:
            info = (
                kopf.login_via_client(**kwargs)
                or kopf.login_with_service_account(**kwargs)
                or kopf.login_with_kubeconfig(**kwargs)
            )
        except Exception as error:  # kopf would log each retry with a 40-line traceback
            raise kopf.TemporaryError(
                f"cannot log in to Kubernetes ({str(error).splitlines()[0]}); point KUBECONFIG "
                "at a kubeconfig or run in-cluster with a service account; retrying in 30 s",
                delay=30,
            ) from None
        self.info = info
        return info

    async def current(self, renew: bool = False) -> kopf.ConnectionInfo:
        if renew and self._kwargs:
            # After a 401: the token was probably rotated; resolve it again off the loop.
            await asyncio.to_thread(self.login, **self._kwargs)
        if self.info is None:
            raise kopf.TemporaryError("not logged in to Kubernetes yet", delay=1)
        return self.info


EXACT_NAMESPACE = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")  # a name, not a kopf pattern
# kopf runs one worker per object with an event, unbounded: 1,000 LLMServices created at
# once held 1,000 workers (each its decoded events, bodies, patches and contexts, ~0.3 MiB)
# and the process's peak RSS kept that high-water mark (160 MiB at 300 LLMServices, 91 MiB
# with this limit; docs/high-availability.md). Objects beyond the limit wait with their
# raw events queued; a worker exits 1 s after its last event instead of kopf's 5 s, so a
# burst drains at the limit's pace. The handlers' own waits are bounded (plan and render
# STEP_SECONDS, API deadlines, no retry loop inside a handler), so 32 slots cannot be held
# by a few slow tenants for long.
WORKER_LIMIT = 32
WORKER_IDLE_SECONDS = 1.0


def configure_settings(settings: kopf.OperatorSettings, options: Options) -> None:
    # Handler progress and the last-handled spec live in annotations: status is ours alone.
    settings.persistence.progress_storage = kopf.AnnotationsProgressStorage(prefix=PREFIX)
    settings.persistence.diffbase_storage = kopf.AnnotationsDiffBaseStorage(
        prefix=PREFIX, key="last-handled-configuration"
    )
    settings.persistence.finalizer = f"{PREFIX}/finalizer"  # unused: no delete handlers
    # Events are our explicit transitions (Planned, Applied, Degraded, Ready,
    # DriftCorrected); kopf's own per-handler log lines stay in the log, not in Events.
    settings.posting.enabled = True
    settings.posting.level = logging.INFO
    settings.posting.loggers = False
    # Ask the apiserver to end watches periodically and never wait on a dead connection.
    settings.watching.server_timeout = options.watch_server_timeout
    settings.watching.client_timeout = options.watch_server_timeout + 60
    settings.watching.connect_timeout = 30
    settings.networking.request_timeout = 60
    settings.networking.connect_timeout = 30
    settings.queueing.error_delays = (1, 2, 5, 10, 30, 60)
    settings.queueing.worker_limit = WORKER_LIMIT
    settings.queueing.idle_timeout = WORKER_IDLE_SECONDS
    if options.namespaces and all(EXACT_NAMESPACE.fullmatch(ns) for ns in options.namespaces):
        # Named namespaces need no cluster-wide listing: without this, kopf lists and
        # watches every namespace to match its patterns, which the chart's per-namespace
        # Roles do not grant (a 403 and a warning on every start). Globs keep the scan.
        settings.scanning.disabled = True


def _autoscalers(kube: KubeClient, reconciler: Reconciler, options: Options) -> Autoscalers:
    scaler_options = AutoscalerOptions(
        prometheus_url=options.prometheus_url,
        allowed_prometheus=options.allowed_prometheus,
        window_seconds=options.metrics_window_seconds,
        time_scale=options.time_scale,
    )
    if options.time_scale == 1.0:
        return Autoscalers(kube, reconciler.metrics, reconciler.plans, scaler_options)
    from tokenfleet.controller.prometheus_source import PrometheusSource
    from tokenfleet.controller.timescale import ScaledSource, SimulatedClock

    clock = SimulatedClock(options.time_scale)
    source = ScaledSource(PrometheusSource(), clock)
    return Autoscalers(
        kube, reconciler.metrics, reconciler.plans, scaler_options, source=source, clock=clock
    )


def build_registry(
    reconciler: Reconciler,
    credentials: Credentials,
    options: Options | None = None,
    drift: Drift | None = None,
    autoscalers: Autoscalers | None = None,
    leadership: Leadership | None = None,
    adapters: AdapterLoaders | None = None,
) -> kopf.OperatorRegistry:
    """The handlers; `drift` may be passed in so a caller (a test) can look at it.
    `leadership` (none: standalone) pauses the autoscalers and drift passes while another
    replica is kopf's active peer."""
    options = options or Options()
    registry = kopf.OperatorRegistry()
    kube: KubeClient = reconciler.kube
    drift = drift or Drift(reconciler, options.resync_seconds, options.recheck_seconds)
    scalers = autoscalers or _autoscalers(kube, reconciler, options)
    loaders = adapters or AdapterLoaders(kube, time_scale=options.time_scale)
    leader = leadership or Leadership.standalone()
    leader.on_pause(scalers.pause)
    leader.on_pause(loaders.pause)
    leader.on_pause(drift.pause)
    leader.on_resume(drift.resume)
    leader.on_resume(scalers.resume)
    leader.on_resume(loaders.resume)
    scalers.active = drift.active = loaders.active = leader.active

    @kopf.on.startup(registry=registry)
    def configure(settings: kopf.OperatorSettings, **_: Any) -> None:
        configure_settings(settings, options)

    @kopf.on.login(registry=registry)
    def login(**kwargs: Any) -> kopf.ConnectionInfo | None:
        return credentials.login(**kwargs)

    @kopf.on.startup(registry=registry)
    async def start_resync(**_: Any) -> None:
        drift.start()
        leader.start()

    @kopf.on.cleanup(registry=registry)
    async def close(**_: Any) -> None:
        await leader.stop()
        await scalers.stop()
        await loaders.stop()
        await drift.stop()
        await kube.close()

    @kopf.on.event(GROUP, VERSION, PLURAL, id="autoscaler", registry=registry)
    async def autoscaler(event: Mapping[str, Any], body: kopf.Body, **_: Any) -> None:
        if event.get("type") == "DELETED":
            # A pass in flight for it writes nothing more (controller/reconcile.py).
            meta = body.get("metadata") or {}
            namespace, name = str(meta.get("namespace") or ""), str(meta.get("name") or "")
            reconciler.deleted(namespace, name, str(meta.get("uid") or ""))
        scalers.sync(event.get("type"), body)
        loaders.sync(event.get("type"), body)

    @kopf.on.resume(GROUP, VERSION, PLURAL, registry=registry)
    @kopf.on.create(GROUP, VERSION, PLURAL, registry=registry)
    @kopf.on.update(GROUP, VERSION, PLURAL, registry=registry)
    async def reconcile(
        body: kopf.Body,
        namespace: str | None,
        name: str,
        logger: kopf.Logger,
        retry: int,
        **_: Any,
    ) -> None:
        drift.track(namespace or "", name)
        status = await reconciler.reconcile(body, logger, retry)
        if status is not None:
            drift.after(namespace or "", name, status)

    for group_version, plural in OWNED_RESOURCES:
        _watch_owned(registry, reconciler, drift, group_version, plural)
    return registry


def _watch_owned(
    registry: kopf.OperatorRegistry,
    reconciler: Reconciler,
    drift: Drift,
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
        if event.get("type") == "DELETED":
            # A namesake may be created next: check ownership again before writing the name.
            reconciler.forget_object(kind, namespace or "", name)
        else:
            lock = reconciler.lock(namespace or "", owner)
            if lock.locked():
                # The watch event of our own apply often arrives before the apply's answer
                # is recorded: wait for the pass to end, then it is recognised as an echo
                # (not a drift, which cost a second full reconcile per change).
                async with lock:
                    pass
            if reconciler.is_own_echo(kind, namespace or "", name, rv):
                return
        drift.fire(namespace or "", owner)
