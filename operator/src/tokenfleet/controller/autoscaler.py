"""The SLO autoscaler's loops: one asyncio task per LLMService with autoscaling enabled.

Each tick reads as its phases: read the LLMService and the reconciler's kept plan
(controller/plans.py) -> the Prometheus URL it may use (prometheus_source.py) -> signals
-> the SLO's ceiling, the mix's and the prefix cache's feed-forward (attainability.py,
prefix_feed.py) -> the pure `policy.decide(spec, current, signals, history, now)` ->
replicas written through the LLMService's scale subresource (the field `kubectl scale`
and an HPA write; the reconciler then renders the Deployment's replicas), the least busy
pods first (deletion_cost.py) -> status.autoscaling and the Autoscaling condition
(autoscaler_status.py, through the shared status writer) -> Events (autoscaler_events.py)
-> operator metrics (autoscaler_metrics.py). The policy's memory travels in `History`,
rebuilt from status after a restart (autoscale/history.py).

Entry points (used by controller/handlers.py, and by harnesses that drive the loop):
- `Autoscalers(kube, metrics, plans, options, source=None, decide=None, clock=time.time)`.
  `source` is a `SignalSource` (default: `PrometheusSource`); `decide` defaults to
  tokenfleet.autoscale.policy.decide.
  - `sync(event_type, body)`: start, retune or stop the loop from an LLMService watch event
    (enabled -> one loop every spec.autoscaling.intervalSeconds; disabled or deleted -> none).
  - `await tick(namespace, name) -> Decision | None`: one decision now (what the loop runs;
    tests and harnesses call it directly for a deterministic step).
  - `history(namespace, name)`: the policy memory kept per LLMService.
  - `pause()` / `resume()`: another replica is the active peer (controller/leadership.py).
  - `await stop()`: cancel every loop and close the Prometheus clients.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

from tokenfleet.api.spec import API_VERSION, KIND, LLMServiceSpec
from tokenfleet.autoscale import type_capacity
from tokenfleet.autoscale.attainability import Ceiling
from tokenfleet.autoscale.history import rebuild_history, with_predicted
from tokenfleet.autoscale.policy import decide as policy_decide
from tokenfleet.autoscale.signals import DEFAULT_WINDOW_SECONDS, Observation, SignalsQuery
from tokenfleet.autoscale.types import Decision, FleetState, History, Signals
from tokenfleet.controller import autoscaler_events as events
from tokenfleet.controller import autoscaler_metrics
from tokenfleet.controller.attainability import Ceilings
from tokenfleet.controller.autoscaler_loops import Loops
from tokenfleet.controller.autoscaler_status import (
    DATA_HOLDS,
    compose_autoscaler_status,
    compose_awaiting,
)
from tokenfleet.controller.deletion_cost import set_deletion_costs
from tokenfleet.controller.kube import KubeClient
from tokenfleet.controller.metrics import Metrics
from tokenfleet.controller.plans import KeptPlan, Plans
from tokenfleet.controller.prefill_pool import scale_prefill, serving_plan
from tokenfleet.controller.prefix_feed import PrefixFeed, fed_hit_rate
from tokenfleet.controller.prometheus_source import (
    Allowlist,
    Observer,
    PrometheusSource,
    Refusal,
    SignalSource,
)
from tokenfleet.controller.routing import zero_floor
from tokenfleet.controller.scale import scale_replicas
from tokenfleet.controller.spec_feed import SpecFeed, fed_acceptance, speculative_tokens
from tokenfleet.controller.statuswrite import write_status
from tokenfleet.errors import UserError

# The shortest a tick's queries may take (simulated fleets divide the interval).
MIN_TICK_DEADLINE_SECONDS = 2.0

Key = tuple[str, str]
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


@dataclass(frozen=True)
class _Read:
    """What a tick decides on: the LLMService as read, and the plan its workload runs."""

    key: Key
    body: Mapping[str, Any]
    spec: LLMServiceSpec
    kept: KeptPlan
    predicted: float  # goodput per replica: the kept plan's, or the GPU types' mean
    current: FleetState
    query: SignalsQuery
    mixed: Any  # type_capacity.from_status: a fleet over several GPU types, else None


@dataclass(frozen=True)
class _Feeds:
    """What the plan says the observed traffic allows: the SLO's ceiling, the capacity at
    the observed mix (shown), and the feed-forward the policy gets."""

    ceiling: Ceiling | None
    mix: float | None
    feed: float | None
    history: History


class Autoscalers:
    """One loop per LLMService with spec.autoscaling.enabled; see the module docstring."""

    def __init__(
        self,
        kube: KubeClient,
        metrics: Metrics,
        plans: Plans,
        options: AutoscalerOptions | None = None,
        *,
        source: SignalSource | None = None,
        decide: Decide | None = None,
        clock: Callable[[], float] = time.time,
        parse: Callable[[Mapping[str, Any]], Any] | None = None,
    ) -> None:
        self.kube = kube
        self.metrics = metrics
        self.plans = plans
        self.options = options or AutoscalerOptions()
        self._source: SignalSource = source or PrometheusSource()
        self._allowlist = Allowlist.of(self.options.allowed())
        self._decide = decide
        self._clock = clock
        self._parse = parse
        self._histories: dict[Key, History] = {}
        self._ceilings = Ceilings()  # controller/attainability.py: the SLO's ceiling
        self._prefix = PrefixFeed()  # controller/prefix_feed.py: plan at the observed hit rate
        self._spec = SpecFeed()  # controller/spec_feed.py: ... and speculative acceptance
        self._logger = logging.getLogger("tokenfleet.autoscaler")
        self._observer = Observer(self._source, self._logger)
        self.loops = Loops(
            self.tick,
            forget=self._forget,
            release=getattr(self._source, "release", None),
            close=getattr(self._source, "close", None),
            time_scale=self.options.time_scale,
            logger=self._logger,
        )
        # A loop whose LLMService had no plan yet ticks as soon as the reconciler keeps one.
        plans.on_keep(self.loops.wake)

    # --- loops (controller/autoscaler_loops.py) -----------------------------------------

    @property
    def active(self) -> bool:
        return self.loops.active

    @active.setter
    def active(self, value: bool) -> None:
        self.loops.active = value

    def sync(self, event_type: str | None, body: Mapping[str, Any]) -> None:
        self.loops.sync(event_type, body)

    async def pause(self) -> None:
        """Another replica is the active peer: stop every loop and close its client. The
        loops wanted are kept; their memory is not (the other replica decides meanwhile,
        so it is rebuilt from status.autoscaling on resume)."""
        await self.loops.pause()
        self._histories.clear()

    def resume(self) -> None:
        self.loops.resume()

    def running(self) -> set[Key]:
        return self.loops.running()

    def history(self, namespace: str, name: str) -> History | None:
        return self._histories.get((namespace, name))

    async def stop(self) -> None:
        await self.loops.stop()

    def _forget(self, key: Key) -> None:
        self._histories.pop(key, None)
        self._observer.forget(key)
        self._ceilings.forget(key)
        self._prefix.forget(key)
        self._spec.forget(key)
        autoscaler_metrics.forget(self.metrics, *key)

    # --- one decision ------------------------------------------------------------------

    async def tick(self, namespace: str, name: str) -> Decision | None:
        """Decide once for one LLMService and act on it; None when there was nothing to do
        (gone, disabled, spec invalid, not planned yet, or the replicas changed under us)."""
        read = await self._read((namespace, name))
        if read is None:
            return None
        now = self._clock()
        target = self._allowlist.target(
            read.spec.autoscaling.prometheus.url, self.options.prometheus_url
        )
        if isinstance(target, Refusal):
            # A configuration gap, not an outage: say what to set, decide nothing.
            compose = functools.partial(compose_awaiting, message=target.message, now=now)
            await write_status(self.kube, namespace, name, compose)
            return None
        url = str(target)
        deadline = self._tick_deadline(float(read.spec.autoscaling.interval_seconds))
        observation, failure = await self._observer.observe(read.query, url, now, deadline)
        feeds = await self._feeds(read, observation, now)
        decision = self._decision(read, observation, failure, feeds.history, feeds, now)
        scaled = await self._act(read, decision, url, now, deadline)
        if scaled is None:
            return None
        roles = await scale_prefill(
            self.kube, self._source, read.body, read.query, url, now, deadline,
            decision.desired, decision.reason,
        )  # fmt: skip
        await self._report(read, decision, observation, feeds, scaled, roles, now)
        return decision

    async def _read(self, key: Key) -> _Read | None:
        """The LLMService and the plan it runs with; None (its loop dropped when it is gone
        or disabled) when there is nothing to decide."""
        namespace, name = key
        body = await self.kube.get(API_VERSION, KIND, namespace, name)
        if body is None or (body.get("metadata") or {}).get("deletionTimestamp"):
            self.loops.drop(key)
            return None
        try:
            spec: LLMServiceSpec = self._parse_service(body).spec
        except UserError:  # the reconciler reports the spec error as Degraded
            return None
        if not spec.autoscaling.enabled:
            self.loops.drop(key)
            return None
        kept = self.plans.latest(key, str((body.get("metadata") or {}).get("uid") or ""))
        self.loops.waiting(key, kept is None)
        if kept is None:  # not planned (yet): the condition stays AwaitingMetrics
            return None
        status = body.get("status") or {}
        # A fleet over several GPU types: each type's replicas count with their own goodput.
        mixed = type_capacity.from_status(status)
        predicted = kept.predicted_goodput if mixed is None else type_capacity.per_replica(mixed[0])
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
        return _Read(key, body, spec, kept, predicted, current, query, mixed)

    async def _feeds(self, read: _Read, observation: Observation | None, now: float) -> _Feeds:
        """The ceiling and the feed-forward of the kept plan at the observed traffic, and
        the policy's memory with the plan's prediction current."""
        key, predicted = read.key, read.predicted
        autoscaling = (read.body.get("status") or {}).get("autoscaling") or {}
        history = self._histories.get(key) or rebuild_history(autoscaling, predicted)
        history = with_predicted(history, predicted)
        ceiling = await self._ceilings.estimate(key, read.kept, read.spec.slo, observation)
        mix = await self._ceilings.mix_capacity(key, read.kept, observation, ceiling)
        feed = mix if self._ceilings.mix_settled(key, now) else None
        hit_rate = fed_hit_rate(
            read.spec.workload.prefix_cache_hit_rate,
            observation.signals.prefix_cache_hit_rate if observation else None,
        )
        acceptance = fed_acceptance(
            read.spec.engine.speculative_acceptance_rate,
            observation.signals.spec_accept_length if observation else None,
            speculative_tokens(read.spec),
        )
        if acceptance is not None:
            # The engines' own acceptance in place of the prior (with the observed prefix
            # hit rate, if any): plan() at both feeds forward.
            fed = await self._spec.predicted(key, read.kept, acceptance, hit_rate)
            if fed is not None:
                history = with_predicted(history, fed)
                feed = None
        elif hit_rate is not None:
            fed = await self._prefix.predicted(key, read.kept, hit_rate)
            if fed is not None:
                history = with_predicted(history, fed)
                feed = None  # plan() at the observed prefix hit rate feeds forward instead
        return _Feeds(ceiling, mix, feed, history)

    def _decision(
        self,
        read: _Read,
        observation: Observation | None,
        failure: str | None,
        history: History,
        feeds: _Feeds,
        now: float,
    ) -> Decision:
        decide: Decide = self._decide or functools.partial(
            policy_decide, ceiling=feeds.ceiling, mix_capacity=feeds.feed
        )
        signals = observation.signals if observation else None
        decision = decide(read.spec, read.current, signals, history, now)
        if read.mixed is not None:
            bounds = (read.current.min_replicas, read.current.max_replicas)
            moved = type_capacity.replicas_for(
                decision.desired, read.current.desired, read.mixed[0], read.mixed[1], bounds
            )
            decision = dataclasses.replace(decision, desired=moved)
        if failure is not None and decision.held in DATA_HOLDS:
            # The hold says why: what Prometheus did, not only that data is missing.
            decision = dataclasses.replace(decision, reason=f"{decision.reason}: {failure}")
        return decision

    async def _act(
        self, read: _Read, decision: Decision, url: str, now: float, deadline: float
    ) -> bool | None:
        """Write the replicas the decision wants: True when scaled, False when there was
        nothing to write, None when the spec changed under the decision (decide again)."""
        if decision.desired == read.current.desired:
            return False
        if decision.desired < read.current.desired:
            await set_deletion_costs(
                self.kube, self._source, read.body, read.query, url,
                nodes_per_replica=read.kept.plan.nodes_per_replica,
                now=now, deadline=deadline, logger=self._logger,
            )  # fmt: skip
        if await scale_replicas(self.kube, read.body, decision.desired):
            return True
        # Someone (kubectl scale, an edit) changed the spec since we read it: decide again
        # next tick from what they wrote; remember nothing of this one.
        self._logger.info("%s/%s: spec changed while deciding; next tick", *read.key)
        return None

    async def _report(
        self,
        read: _Read,
        decision: Decision,
        observation: Observation | None,
        feeds: _Feeds,
        scaled: bool,
        roles: list[dict[str, Any]] | None,
        now: float,
    ) -> None:
        """Remember the decision; status, Events and metrics say what it was."""
        namespace, name = read.key
        self._histories[(namespace, name)] = decision.history
        compose = functools.partial(
            compose_autoscaler_status,
            decision=decision,
            observation=observation,
            now=now,
            scaled=scaled,
            ceiling=feeds.ceiling,
            mix_capacity=feeds.mix,
            roles=roles,
        )
        written = await write_status(self.kube, namespace, name, compose)
        previous = written.old if written else (read.body.get("status") or {})
        events.post_decision(read.body, decision, previous)
        events.post_ceiling(read.body, feeds.ceiling, previous)
        autoscaler_metrics.record(self.metrics, namespace, name, decision, read.current)

    def _parse_service(self, body: Mapping[str, Any]) -> Any:
        from tokenfleet.api import parse_llmservice

        return (self._parse or parse_llmservice)(body)

    def _tick_deadline(self, interval: float) -> float:
        """All queries of one tick end within one interval (wall seconds), however slowly
        Prometheus trickles: the next tick starts on time, from scratch."""
        return max(MIN_TICK_DEADLINE_SECONDS, interval / self.options.time_scale)


# An awaitable-returning callable type, for harnesses that wrap tick().
Tick = Callable[[str, str], Awaitable[Decision | None]]
