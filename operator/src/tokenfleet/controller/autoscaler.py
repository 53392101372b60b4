"""The SLO autoscaler's I/O shell: one asyncio task per LLMService with autoscaling enabled.

Each tick: read the LLMService (spec + status) -> signals from Prometheus -> the pure
`policy.decide(spec, current, signals, history, now)` -> replicas written through the
LLMService's scale subresource (the field `kubectl scale` and an HPA write, so they stay
coherent; the reconciler then renders the Deployment's replicas from spec.replicas) ->
status.autoscaling + the Autoscaling condition (through the shared status writer, so the
reconciler's part is never reverted) -> an Event on change -> operator metrics.

Entry points (used by controller/handlers.py, and by harnesses that drive the loop):
- `Autoscalers(kube, metrics, options, source=None, decide=None, clock=time.time)`:
  the per-LLMService loops. `source` is a `SignalSource` (controller/prometheus_source.py;
  default: `PrometheusSource`, autoscale.signals against the URL its `Allowlist` resolves
  from spec.autoscaling.prometheus.url or options.prometheus_url); `decide` defaults to
  tokenfleet.autoscale.policy.decide.
  - `sync(event_type, body)`: start, retune or stop the loop from an LLMService watch event
    (enabled -> one loop every spec.autoscaling.intervalSeconds; disabled or deleted -> none).
  - `await tick(namespace, name) -> Decision | None`: one decision now (what the loop runs;
    tests and harnesses call it directly for a deterministic step).
  - `history(namespace, name)`: the policy memory kept in memory per LLMService; rebuilt
    from status.autoscaling (capacity.observed, lastScaleTime, the last decision) after an
    operator restart.
  - `await stop()`: cancel every loop and close the Prometheus clients.

Scale-down: before lowering replicas of a Deployment, every engine pod gets
`controller.kubernetes.io/pod-deletion-cost` = its requests in flight (running + waiting, from
Prometheus), so the ReplicaSet removes the least busy pods first; the pods' preStop drain and
terminationGracePeriodSeconds (render/timing.py) let their in-flight requests finish.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
import json
import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, get_args

import kopf

from tokenfleet.api.spec import LLMServiceSpec
from tokenfleet.autoscale import type_capacity
from tokenfleet.autoscale.attainability import Ceiling
from tokenfleet.autoscale.history import iso, parse_iso, rebuild_history, with_predicted
from tokenfleet.autoscale.policy import decide as policy_decide
from tokenfleet.autoscale.prometheus import PrometheusError
from tokenfleet.autoscale.signals import DEFAULT_WINDOW_SECONDS, Observation, SignalsQuery
from tokenfleet.autoscale.types import (
    Decision,
    FleetState,
    History,
    HoldReason,
    Signals,
)
from tokenfleet.controller import status as st
from tokenfleet.controller.attainability import CONDITION as CEILING_CONDITION
from tokenfleet.controller.attainability import (
    Ceilings,
    attainability_condition,
    attainability_status,
)
from tokenfleet.controller.events import PostEvent
from tokenfleet.controller.kube import ApiError, KubeClient
from tokenfleet.controller.metrics import Metrics
from tokenfleet.controller.prefill_pool import scale_prefill, serving_plan
from tokenfleet.controller.prefix_feed import PrefixFeed, fed_hit_rate
from tokenfleet.controller.prometheus_source import (
    Allowlist,
    PrometheusSource,
    Refusal,
    SignalSource,
)
from tokenfleet.controller.routing import zero_floor
from tokenfleet.controller.spec_feed import SpecFeed, fed_acceptance, speculative_tokens
from tokenfleet.controller.statuswrite import write_status
from tokenfleet.controller.tasks import cancel_all

API_VERSION, KIND = "tokenfleet.dev/v1alpha1", "LLMService"
DELETION_COST = "controller.kubernetes.io/pod-deletion-cost"
# Holds that mean "the data cannot be trusted": the condition turns False (Held). The other
# holds (ReplicasStarting, Cooldown, Stabilizing) are the policy working as meant: Active.
DATA_HOLDS = frozenset({"PrometheusDown", "NoData", "StaleData", "PartialData"})
HOLD_REASONS: tuple[str, ...] = get_args(HoldReason)
AUTOSCALER_KEYS = frozenset({"autoscaling", "latestTtftMs"})
# spec.autoscaling.intervalSeconds' default (api/autoscaling.py), for bodies the API server
# has not defaulted (an older CRD).
DEFAULT_INTERVAL_SECONDS = 30.0
# Scale writes in a row that may meet a 409 from a status or annotation write (the spec
# unchanged) before the tick gives up: as for status (controller/statuswrite.py).
SCALE_ATTEMPTS = 5
# The shortest a tick's queries may take (simulated fleets divide the interval).
MIN_TICK_DEADLINE_SECONDS = 2.0
# After an unexpected error in a tick, wait at least this long before the next one.
ERROR_BACKOFF_SECONDS = 5.0

Decide = Callable[[LLMServiceSpec, FleetState, Signals | None, History, float], Decision]


@dataclass(frozen=True)
class AutoscalerOptions:
    prometheus_url: str | None = None
    """--prometheus-url: used when spec.autoscaling.prometheus.url is unset."""
    window_seconds: float = DEFAULT_WINDOW_SECONDS
    """rate() window of the signal queries (autoscale/signals.py says why 60 s)."""
    time_scale: float = 1.0
    """Simulated fleets only (controller/timescale.py): the loop sleeps intervalSeconds / this
    many wall seconds. 1 in production."""
    allowed_prometheus: tuple[str, ...] | None = None
    """--allow-prometheus: the Prometheus URLs an LLMService may name. None: only
    `prometheus_url` (the operator's own), so a tenant cannot aim requests at any host."""

    def allowed(self) -> tuple[str, ...]:
        if self.allowed_prometheus is not None:
            return self.allowed_prometheus
        return (self.prometheus_url,) if self.prometheus_url else ()


def autoscaling_condition(decision: Decision) -> st.Condition:
    if decision.held in DATA_HOLDS:
        message = decision.reason
        if not message.startswith(str(decision.held)):
            message = f"{decision.held}: {message}"
        return st.Condition("Autoscaling", False, "Held", message)
    if decision.limited == "max":
        return st.Condition("Autoscaling", True, "LimitedAtMax", decision.reason)
    return st.Condition("Autoscaling", True, "Active", decision.reason)


def autoscaling_status(
    decision: Decision,
    observation: Observation | None,
    *,
    now: float,
    last_scale_at: float | None,
) -> dict[str, Any]:
    """status.autoscaling (camelCase, absent values left out)."""
    from tokenfleet.api import AutoscalingStatus, CapacityStatus
    from tokenfleet.api import Signals as SignalsStatus

    signals = observation.signals if observation is not None else None
    capacity = decision.history.capacity
    record = AutoscalingStatus(
        desired_replicas=decision.desired,
        last_decision_time=iso(now),
        last_scale_time=iso(last_scale_at) if last_scale_at is not None else None,
        reason=decision.reason[:1000],
        driver=decision.driver,
        held=decision.held,
        signals=None
        if signals is None
        else SignalsStatus(
            ttft_seconds=_round(signals.ttft_quantile_seconds),
            ttft_attainment=_round(signals.ttft_attainment),
            tpot_attainment=_round(signals.tpot_attainment),
            goodput=_round(signals.goodput),
            request_rate=_round(signals.request_rate),
            running_per_replica=_round(signals.running_per_replica),
            waiting_per_replica=_round(signals.waiting_per_replica),
            kv_usage=_round(signals.kv_usage),
            reporting_replicas=signals.reporting_replicas,
            picker_queued=_round(signals.picker_queued),
            queue_wait_seconds=_round(signals.queue_wait_quantile_seconds),
            prefix_cache_hit_rate=_round(signals.prefix_cache_hit_rate),
        ),
        capacity=None
        if capacity is None
        else CapacityStatus(
            predicted=_round(capacity.predicted), observed=_round(capacity.observed)
        ),
        cold_start_seconds=_round(decision.history.cold_start_seconds),
    )
    return record.to_dict()


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 4)


def compose_autoscaler_status(
    obj: Mapping[str, Any],
    decision: Decision,
    observation: Observation | None,
    *,
    now: float,
    scaled: bool,
    ceiling: Ceiling | None = None,
    mix_capacity: float | None = None,
    roles: list[dict[str, Any]] | None = None,
) -> dict[str, Any] | None:
    """The whole new status composed onto the CURRENT object: the autoscaler's condition and
    keys replaced, the reconciler's kept. None (write nothing) once the object is being
    deleted or autoscaling was turned off meanwhile: the reconciler then says Disabled."""
    meta = obj.get("metadata") or {}
    enabled = ((obj.get("spec") or {}).get("autoscaling") or {}).get("enabled", False)
    if meta.get("deletionTimestamp") or not enabled:
        return None
    previous = dict(obj.get("status") or {})
    before = previous.get("autoscaling") or {}
    last_scale = now if scaled else parse_iso(before.get("lastScaleTime"))
    record = autoscaling_status(decision, observation, now=now, last_scale_at=last_scale)
    attainability = attainability_status(ceiling)
    if attainability is not None:
        record["attainability"] = attainability
    if mix_capacity is not None and "capacity" in record:
        record["capacity"]["predictedAtMix"] = round(mix_capacity, 4)
    if roles:
        record["roles"] = roles
    produced: dict[str, Any] = {
        "autoscaling": record,
        "conditions": st.merge_conditions(
            previous.get("conditions") or [],
            [autoscaling_condition(decision)]
            + ([attainability_condition(ceiling)] if ceiling is not None else []),
            generation=int(meta.get("generation") or 0),
            now=iso(now),
        ),
    }
    signals = observation.signals if observation is not None else None
    if signals is not None and signals.ttft_quantile_seconds is not None:
        produced["latestTtftMs"] = round(signals.ttft_quantile_seconds * 1000, 1)
    return st.replace_keys(previous, AUTOSCALER_KEYS, produced)


def compose_awaiting(obj: Mapping[str, Any], message: str, *, now: float) -> dict[str, Any] | None:
    """Autoscaling=Unknown AwaitingMetrics with why, onto the current object (no decision)."""
    meta = obj.get("metadata") or {}
    enabled = ((obj.get("spec") or {}).get("autoscaling") or {}).get("enabled", False)
    if meta.get("deletionTimestamp") or not enabled:
        return None
    previous = dict(obj.get("status") or {})
    conditions = st.merge_conditions(
        previous.get("conditions") or [],
        [st.Condition("Autoscaling", None, "AwaitingMetrics", message)],
        generation=int(meta.get("generation") or 0),
        now=iso(now),
    )
    return {**previous, "conditions": conditions}


class Autoscalers:
    """One loop per LLMService with spec.autoscaling.enabled; see the module docstring."""

    def __init__(
        self,
        kube: KubeClient,
        metrics: Metrics,
        options: AutoscalerOptions | None = None,
        *,
        source: SignalSource | None = None,
        decide: Decide | None = None,
        clock: Callable[[], float] = time.time,
        parse: Callable[[Mapping[str, Any]], Any] | None = None,
    ) -> None:
        self.kube = kube
        self.metrics = metrics
        self.options = options or AutoscalerOptions()
        self._source: SignalSource = source or PrometheusSource()
        self._allowlist = Allowlist.of(self.options.allowed())
        self._decide = decide
        self._clock = clock
        self._parse = parse
        self._tasks: dict[tuple[str, str], asyncio.Task[None]] = {}
        # (interval, spec.autoscaling as JSON): what each running loop was started with, and
        # what each LLMService wants (kept while paused: controller/leadership.py).
        self._settings: dict[tuple[str, str], tuple[float, str]] = {}
        self._wanted: dict[tuple[str, str], tuple[float, str]] = {}
        self.active = True
        self._histories: dict[tuple[str, str], History] = {}
        # Loops whose last tick found no plan yet: the next watch event wakes them at once
        # instead of after a whole interval (the reconciler's first status is that event).
        self._waiting: dict[tuple[str, str], asyncio.Event] = {}
        # The kind of the last Prometheus failure per LLMService: one warning per change.
        self._failures: dict[tuple[str, str], str] = {}
        self._ceilings = Ceilings()  # controller/attainability.py: the SLO's ceiling
        self._prefix = PrefixFeed()  # controller/prefix_feed.py: plan at the observed hit rate
        self._spec = SpecFeed()  # controller/spec_feed.py: ... and speculative acceptance
        self._logger = logging.getLogger("tokenfleet.autoscaler")

    # --- loops -------------------------------------------------------------------------

    def sync(self, event_type: str | None, body: Mapping[str, Any]) -> None:
        meta = body.get("metadata") or {}
        key = (str(meta.get("namespace") or ""), str(meta.get("name") or ""))
        auto = (body.get("spec") or {}).get("autoscaling") or {}
        if event_type == "DELETED" or meta.get("deletionTimestamp") or not auto.get("enabled"):
            self._drop(key)
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
            wake = self._waiting.get(key)
            if wake is not None:
                wake.set()
            return
        if task is not None:
            task.cancel()
        self._settings[key] = setting
        self._tasks[key] = asyncio.create_task(self._loop(key, interval))

    async def pause(self) -> None:
        """Another replica is the active peer: stop every loop and close its client. The
        loops wanted are kept; their memory is not (the other replica decides meanwhile,
        so it is rebuilt from status.autoscaling on resume)."""
        self.active = False
        await cancel_all(self._tasks)
        self._settings.clear()
        self._histories.clear()
        self._waiting.clear()
        close = getattr(self._source, "close", None)
        if close is not None:
            await close()

    def resume(self) -> None:
        self.active = True
        for (namespace, name), (_, auto) in sorted(self._wanted.items()):
            body = {
                "metadata": {"namespace": namespace, "name": name},
                "spec": {"autoscaling": json.loads(auto)},
            }
            self.sync("MODIFIED", body)

    def running(self) -> set[tuple[str, str]]:
        return {key for key, task in self._tasks.items() if not task.done()}

    def history(self, namespace: str, name: str) -> History | None:
        return self._histories.get((namespace, name))

    async def stop(self) -> None:
        await cancel_all(self._tasks)
        close = getattr(self._source, "close", None)
        if close is not None:
            await close()

    def _drop(self, key: tuple[str, str]) -> None:
        task = self._tasks.pop(key, None)
        if task is not None and task is not asyncio.current_task():
            task.cancel()
        self._settings.pop(key, None)
        self._wanted.pop(key, None)
        self._histories.pop(key, None)
        self._waiting.pop(key, None)
        self._failures.pop(key, None)
        self._ceilings.forget(key)
        self._prefix.forget(key)
        self._spec.forget(key)
        self._forget_metrics(*key)

    async def _loop(self, key: tuple[str, str], interval: float) -> None:
        me = asyncio.current_task()
        try:
            await self._run(key, interval, me)
        finally:
            if self._tasks.get(key) in (None, me):  # not replaced by a restarted loop
                self._tasks.pop(key, None)
                release = getattr(self._source, "release", None)
                if release is not None:
                    await asyncio.shield(release(*key))

    async def _run(
        self, key: tuple[str, str], interval: float, me: asyncio.Task[Any] | None
    ) -> None:
        loop = asyncio.get_running_loop()
        while self._tasks.get(key) is me:
            delay = interval
            started = loop.time()
            try:
                await self.tick(*key)
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
            pause = until_next_tick(started, loop.time(), delay / self.options.time_scale)
            wake = self._waiting.get(key)
            if wake is None:
                await asyncio.sleep(pause)
                continue
            wake.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(wake.wait(), pause)

    # --- one decision ------------------------------------------------------------------

    async def tick(self, namespace: str, name: str) -> Decision | None:
        """Decide once for one LLMService and act on it; None when there was nothing to do
        (gone, disabled, spec invalid, not planned yet, or the replicas changed under us)."""
        key = (namespace, name)
        body = await self.kube.get(API_VERSION, KIND, namespace, name)
        if body is None or (body.get("metadata") or {}).get("deletionTimestamp"):
            self._drop(key)
            return None
        try:
            service = self._parse_service(body)
        except Exception:  # the reconciler reports the spec error as Degraded
            return None
        spec = service.spec
        if not spec.autoscaling.enabled:
            self._drop(key)
            return None
        status = body.get("status") or {}
        predicted = ((status.get("plan") or {}).get("predicted") or {}).get(
            "goodputRequestsPerSecond"
        )
        if predicted is None:  # not planned (yet): the condition stays AwaitingMetrics
            self._waiting.setdefault(key, asyncio.Event())
            return None
        self._waiting.pop(key, None)
        now = self._clock()
        # A fleet over several GPU types: each type's replicas count with their own goodput.
        mixed = type_capacity.from_status(status)
        if mixed is not None:
            predicted = type_capacity.per_replica(mixed[0])
        history = self._histories.get(key) or rebuild_history(
            status.get("autoscaling") or {}, float(predicted)
        )
        history = with_predicted(history, float(predicted))
        current = FleetState(
            desired=int(spec.replicas),
            ready=int(status.get("readyReplicas") or 0),
            min_replicas=zero_floor(spec, status),
            max_replicas=spec.autoscaling.max_replicas,
        )
        query = SignalsQuery(
            engine=spec.engine.kind,
            namespace=namespace,
            llmservice=name,
            ttft_slo_seconds=spec.slo.ttft_ms / 1000.0,
            tpot_slo_seconds=spec.slo.tpot_ms / 1000.0,
            quantile=spec.slo.quantile,
            window_seconds=self.options.window_seconds,
            # Disaggregated: this decision is the decode pool's, on the decode pods' series.
            role="decode" if serving_plan(body) is not None else None,
        )
        target = self._allowlist.target(
            spec.autoscaling.prometheus.url, self.options.prometheus_url
        )
        if isinstance(target, Refusal):
            # A configuration gap, not an outage: say what to set, decide nothing.
            message = target.message
            await write_status(
                self.kube, namespace, name, lambda obj: compose_awaiting(obj, message, now=now)
            )
            return None
        url = str(target)
        deadline = self._tick_deadline(float(spec.autoscaling.interval_seconds))
        observation, failure = await self._observe(query, url, now, key, deadline)
        ceiling = await self._ceilings.estimate(key, body, service, observation)
        mix = await self._ceilings.mix_capacity(key, body, service, observation, ceiling)
        hit_rate = fed_hit_rate(
            spec.workload.prefix_cache_hit_rate,
            observation.signals.prefix_cache_hit_rate if observation else None,
        )
        feed = mix if self._ceilings.mix_settled(key, now) else None
        acceptance = fed_acceptance(
            spec.engine.speculative_acceptance_rate,
            observation.signals.spec_accept_length if observation else None,
            speculative_tokens(service),
        )
        if acceptance is not None:
            # The engines' own acceptance in place of the prior (with the observed prefix
            # hit rate, if any): plan() at both feeds forward.
            fed = await self._spec.predicted(key, body, service, acceptance, hit_rate)
            if fed is not None:
                history = _with_predicted(history, fed)
                feed = None
        elif hit_rate is not None:
            fed = await self._prefix.predicted(key, body, service, hit_rate)
            if fed is not None:
                history = with_predicted(history, fed)
                feed = None  # plan() at the observed prefix hit rate feeds forward instead
        decide: Decide = self._decide or functools.partial(
            policy_decide, ceiling=ceiling, mix_capacity=feed
        )
        decision = decide(spec, current, observation.signals if observation else None, history, now)
        if mixed is not None:
            bounds = (current.min_replicas, current.max_replicas)
            moved = type_capacity.replicas_for(
                decision.desired, current.desired, mixed[0], mixed[1], bounds
            )
            decision = dataclasses.replace(decision, desired=moved)
        if failure is not None and decision.held in DATA_HOLDS:
            # The hold says why: what Prometheus did, not only that data is missing.
            decision = dataclasses.replace(decision, reason=f"{decision.reason}: {failure}")
        scaled = False
        if decision.desired != current.desired:
            if decision.desired < current.desired:
                await self._set_deletion_costs(body, query, url, now, deadline)
            if not await self._scale(body, decision.desired):
                # Someone (kubectl scale, an edit) changed the spec since we read it:
                # decide again next tick from what they wrote; remember nothing of this one.
                self._logger.info("%s/%s: spec changed while deciding; next tick", *key)
                return None
            scaled = True
        self._histories[key] = decision.history
        roles = await scale_prefill(
            self.kube, self._source, body, query, url, now, deadline, decision.desired,
            decision.reason,
        )  # fmt: skip
        written = await write_status(
            self.kube,
            namespace,
            name,
            lambda obj: compose_autoscaler_status(
                obj,
                decision,
                observation,
                now=now,
                scaled=scaled,
                ceiling=ceiling,
                mix_capacity=mix,
                roles=roles,
            ),
        )
        self._events(body, decision, written.old if written else status)
        self._ceiling_event(body, ceiling, written.old if written else status)
        self._record_metrics(namespace, name, decision, current)
        return decision

    async def _scale(self, body: Mapping[str, Any], replicas: int) -> bool:
        """PATCH the scale subresource under the resourceVersion the decision was made on.

        A 409 whose cause left the spec as it was (a status write, kopf's annotations) is
        retried on the fresh version; one that changed the spec (a `kubectl scale`, an edit:
        a new generation) means the decision is stale: False, nothing written."""
        meta = body.get("metadata") or {}
        namespace, name = str(meta.get("namespace")), str(meta.get("name"))
        generation = meta.get("generation")
        version = meta.get("resourceVersion")
        for _ in range(SCALE_ATTEMPTS):
            try:
                await self.kube.scale(
                    API_VERSION, KIND, namespace, name, replicas, resource_version=version
                )
                return True
            except ApiError as error:
                if error.status != 409:
                    raise
            fresh = await self.kube.get(API_VERSION, KIND, namespace, name)
            if fresh is None or (fresh.get("metadata") or {}).get("generation") != generation:
                return False
            version = (fresh.get("metadata") or {}).get("resourceVersion")
        return False

    def _parse_service(self, body: Mapping[str, Any]) -> Any:
        if self._parse is not None:
            return self._parse(body)
        from tokenfleet.api import parse_llmservice

        return parse_llmservice(body)

    def _tick_deadline(self, interval: float) -> float:
        """All queries of one tick end within one interval (wall seconds), however slowly
        Prometheus trickles: the next tick starts on time, from scratch."""
        return max(MIN_TICK_DEADLINE_SECONDS, interval / self.options.time_scale)

    async def _observe(
        self, query: SignalsQuery, url: str, now: float, key: tuple[str, str], deadline: float
    ) -> tuple[Observation | None, str | None]:
        """(signals, None), or (None, why not): logged once per kind of failure, not per tick."""
        try:
            async with asyncio.timeout(deadline):
                observation = await self._source.signals(query, url, now)
        except TimeoutError:
            failure = (
                f"Prometheus at {url} gave no complete answer within the tick deadline "
                f"({deadline:g} s)"
            )
            kind = "deadline"
        except PrometheusError as error:
            failure, kind = str(error), type(error).__name__
        else:
            if self._failures.pop(key, None) is not None:
                self._logger.info("%s/%s: Prometheus answers again", *key)
            return observation, None
        if self._failures.get(key) != kind:
            self._logger.warning("%s/%s: Prometheus: %s; holding", *key, failure)
        else:
            self._logger.debug("%s/%s: Prometheus: %s; holding", *key, failure)
        self._failures[key] = kind
        return None, failure[:600]

    async def _set_deletion_costs(
        self, body: Mapping[str, Any], query: SignalsQuery, url: str, now: float, deadline: float
    ) -> None:
        """Least busy pods are removed first (Deployments only: a ReplicaSet honours the
        annotation, a LeaderWorkerSet removes the highest group index whatever it says)."""
        status = body.get("status") or {}
        selector = status.get("selector")
        if not selector or int((status.get("plan") or {}).get("nodesPerReplica") or 1) > 1:
            return
        namespace, name = query.namespace, query.llmservice
        try:
            async with asyncio.timeout(deadline):
                load = await self._source.pod_load(query, url, now)
            pods = await self.kube.list("v1", "Pod", namespace, str(selector))
            for pod in pods:
                pod_name = pod["metadata"]["name"]
                # Unreported pods (still starting, or not scraped) cost 0: deleted first.
                cost = str(round(load.get(pod_name, 0.0)))
                annotations = pod["metadata"].get("annotations") or {}
                if annotations.get(DELETION_COST) != cost:
                    patch = {"metadata": {"annotations": {DELETION_COST: cost}}}
                    await self.kube.patch("v1", "Pod", namespace, pod_name, patch)
        except (PrometheusError, ApiError, TimeoutError) as error:
            # Best effort: without costs the ReplicaSet still picks (unready pods first).
            self._logger.warning("%s/%s: pod-deletion-cost not set: %s", namespace, name, error)

    def _events(
        self, body: Mapping[str, Any], decision: Decision, previous: Mapping[str, Any]
    ) -> None:
        if decision.direction != "none":
            reason = "ScaledUp" if decision.direction == "up" else "ScaledDown"
            message = f"replicas {decision.previous} -> {decision.desired}: {decision.reason}"
            _post(kopf.info, body, reason, message)
        before: Mapping[str, Any] = next(
            (c for c in previous.get("conditions") or [] if c.get("type") == "Autoscaling"), {}
        )
        was_held = before.get("reason") == "Held"
        now_held = decision.held in DATA_HOLDS
        if now_held and not was_held:
            _post(kopf.warn, body, "AutoscalingHeld", autoscaling_condition(decision).message)
        elif was_held and not now_held:
            _post(kopf.info, body, "AutoscalingResumed", decision.reason)

    def _ceiling_event(
        self, body: Mapping[str, Any], ceiling: Ceiling | None, previous: Mapping[str, Any]
    ) -> None:
        """A Warning when the traffic starts to keep the SLO out of reach, a Normal one when
        it stops: the transition of the SLOAttainable condition."""
        if ceiling is None:
            return
        before: Mapping[str, Any] = next(
            (c for c in previous.get("conditions") or [] if c.get("type") == CEILING_CONDITION),
            {},
        )
        was_limited = before.get("status") == "False"
        if ceiling.limited and not was_limited:
            _post(kopf.warn, body, "SLOUnattainable", ceiling.message())
        elif was_limited and not ceiling.limited:
            _post(kopf.info, body, "SLOAttainable", ceiling.message())

    def _record_metrics(
        self, namespace: str, name: str, decision: Decision, current: FleetState
    ) -> None:
        m = self.metrics
        m.autoscaler_desired.labels(namespace, name).set(decision.desired)
        m.autoscaler_ready.labels(namespace, name).set(current.ready)
        m.autoscaler_decisions.labels(namespace, name, decision.direction, decision.driver).inc()
        for reason in HOLD_REASONS:
            m.autoscaler_held.labels(namespace, name, reason).set(
                1 if decision.held == reason else 0
            )
        m.autoscaler_at_max.labels(namespace, name).set(1 if decision.limited == "max" else 0)
        capacity = decision.history.capacity
        if capacity is not None:
            m.autoscaler_capacity.labels(namespace, name, "predicted").set(capacity.predicted)
            if capacity.observed is not None:
                m.autoscaler_capacity.labels(namespace, name, "observed").set(capacity.observed)

    def _forget_metrics(self, namespace: str, name: str) -> None:
        m = self.metrics
        series: list[tuple[Any, tuple[str, ...]]] = [
            (m.autoscaler_desired, ()),
            (m.autoscaler_ready, ()),
            (m.autoscaler_at_max, ()),
            *((m.autoscaler_held, (reason,)) for reason in HOLD_REASONS),
            *((m.autoscaler_capacity, (source,)) for source in ("predicted", "observed")),
        ]
        for family in m.autoscaler_decisions.collect():
            for sample in family.samples:
                labels = sample.labels
                if labels.get("namespace") == namespace and labels.get("llmservice") == name:
                    series.append((m.autoscaler_decisions, (labels["direction"], labels["driver"])))
        for metric, extra in series:
            with contextlib.suppress(KeyError):  # never recorded for this LLMService
                metric.remove(namespace, name, *extra)


def until_next_tick(started: float, now: float, period: float) -> float:
    """Seconds to wait so ticks start every `period` (a fixed schedule): the tick's own
    time counts, so a 5 s interval ticks every 5 s, not every 5 s plus the tick. A tick
    longer than its period is followed at once, never by a burst of missed ones."""
    return max(0.0, started + period - now)


def _post(fn: PostEvent, body: Mapping[str, Any], reason: str, message: str) -> None:
    try:
        fn(body, reason=reason, message=message[:1000])
    except LookupError:  # outside kopf's context (a harness calling tick): log only
        logging.getLogger("tokenfleet.events").info("%s: %s", reason, message)


# An awaitable-returning callable type, for harnesses that wrap tick().
Tick = Callable[[str, str], Awaitable[Decision | None]]
