"""One reconcile of one LLMService: read -> plan -> render -> preconditions -> apply -> status.

Everything that can refuse (a bad spec, a failed plan, a missing CRD, a render error) is
decided before the first write, so a refused LLMService never leaves half a workload
behind. A pass re-reads its LLMService under its lock before the first write and stops if
it was deleted meanwhile; a deletion the watch reports (handlers.py) stops it before its
next write: nothing is re-created for an owner that is gone. Kubernetes I/O goes through
`kube.KubeClient`; conditions come from `status`.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

import kopf

from tokenfleet.api import API_VERSION, KIND, LLMService, PlanStatus, parse_llmservice, plan_service
from tokenfleet.capacity.types import Plan
from tokenfleet.controller import gpu_placement, ownership
from tokenfleet.controller import status as st
from tokenfleet.controller.events import PostEvent
from tokenfleet.controller.kube import ApiError, KubeClient
from tokenfleet.controller.metrics import Metrics
from tokenfleet.controller.names import NameClaims
from tokenfleet.controller.plans import KeptPlan, Plans, config_digest
from tokenfleet.controller.routing import RoutingState, routing_state
from tokenfleet.controller.statuswrite import write_status
from tokenfleet.engines.images import DEFAULT_IMAGES, ImageTable
from tokenfleet.render.desired import (
    Cluster,
    Desired,
    PlanStep,
    StepFailed,
    config_map_ref,
    desired,
    model_config,
)
from tokenfleet.render.meta import GPU_TYPE_LABEL
from tokenfleet.render.routing import DEFAULT_PICKER_ROLE

MANAGED_BY = {"app.kubernetes.io/managed-by": "tokenfleet"}
INSTANCE_LABEL = "tokenfleet.dev/llmservice"
LWS_API, LWS_PLURAL = "leaderworkerset.x-k8s.io/v1", "leaderworkersets"
MONITORING_API, MONITORING_PLURAL = "monitoring.coreos.com/v1", "podmonitors"
LWS_INSTALL = (
    "install LeaderWorkerSet (kubectl apply --server-side -f "
    "https://github.com/kubernetes-sigs/lws/releases/latest/download/manifests.yaml)"
)
WORKLOAD_KINDS = ("Deployment", "LeaderWorkerSet")
# Time limit of one plan or render: a bounded spec plans in milliseconds (a 405B
# multi-node plan in under 0.1 s on one core), so 10 s is two orders of margin.
STEP_SECONDS = 10.0
T = TypeVar("T")
# A 403 is the operator's RBAC: routing's writes are granted per namespace (the chart's
# routingNamespaces), the rest wherever it watches.
FORBIDDEN_FIX = (
    "the operator is not allowed to write this here: with spec.routing, the namespace must "
    "be one of the chart's routingNamespaces (or watchNamespaces); ask the operator's admin"
)
# Backoff for apiserver errors (5xx, 429, dropped connections), by the consecutive
# failures of one LLMService (not kopf's per-handler retry count, which restarts with
# every event): fast for a blip, capped at a minute for an outage.
RETRY_DELAYS = (1.0, 2.0, 5.0, 10.0, 30.0, 60.0)
# A 409 is a concurrent writer: the next pass re-reads and wins; no reason to wait long.
CONFLICT_DELAY = 1.0
# Consecutive failures before the error goes into status: a blip (one 409, one 503 during
# an apiserver rollout) stays quiet; 3 failures span 1 + 2 s of retries.
REPORT_AFTER_FAILURES = 3


def retry_delay(error: ApiError, failures: int) -> float:
    if error.status == 409:
        return CONFLICT_DELAY
    return RETRY_DELAYS[min(failures - 1, len(RETRY_DELAYS) - 1)]


class Gone(Exception):
    """The LLMService was deleted (or replaced by a namesake) while its pass ran: nothing
    more is written for it."""


@dataclass(frozen=True)
class _Inputs:
    """What one pass plans from: the spec, its model config, what the cluster serves."""

    service: LLMService
    config: dict[str, Any] | None
    cluster: Cluster
    routing: RoutingState


class Refused(Exception):
    """A reason not to apply anything: becomes the Degraded condition."""

    def __init__(self, reason: str, message: str, planned: st.Condition | None = None) -> None:
        super().__init__(message)
        self.reason = reason
        self.message = message
        self.planned = planned  # the Planned condition, when planning got that far


@dataclass
class Pipeline:
    """The pure steps, injectable so tests can swap one without patching modules; the rest
    of the desired state is render.desired, shared with `tokenfleet render`."""

    parse: Callable[[Mapping[str, Any]], LLMService] = parse_llmservice
    # api.plan_service: capacity.plan whose errors name spec fields, not CLI flags.
    plan: PlanStep = plan_service
    images: ImageTable = field(default_factory=lambda: DEFAULT_IMAGES)  # --engine-image
    picker_role: str = DEFAULT_PICKER_ROLE  # --picker-cluster-role

    @classmethod
    def default(cls) -> Pipeline:
        return cls()


@dataclass(frozen=True)
class Policy:
    """What the platform team allows LLMService authors (operator flags; empty: anything).

    Creating an LLMService runs any image with any service account in its namespace, as
    powerful as creating a Deployment there; these allowlists narrow that down.
    """

    image_prefixes: tuple[str, ...] = ()  # --allow-image: e.g. "vllm/vllm-openai:"
    service_accounts: tuple[str, ...] = ()  # --allow-service-account

    def check(self, service: LLMService, plan: Plan, planned: st.Condition) -> None:
        spec = service.spec
        image = spec.engine.image_for(plan.engine_version)
        if self.image_prefixes and not image.startswith(self.image_prefixes):
            raise Refused(
                "NotAllowed",
                f"spec.engine.image={image}: not allowed by this operator (--allow-image "
                f"{' '.join(self.image_prefixes)}); use an image starting with one of these, "
                "or ask the cluster's platform team to allow it",
                planned,
            )
        account = spec.pod_template.service_account_name
        if self.service_accounts and account and account not in self.service_accounts:
            raise Refused(
                "NotAllowed",
                f"spec.podTemplate.serviceAccountName={account}: not allowed by this operator "
                f"(--allow-service-account {' '.join(self.service_accounts)}); use one of "
                "these or leave it unset",
                planned,
            )


@dataclass
class Reconciler:
    kube: KubeClient
    metrics: Metrics
    pipeline: Pipeline = field(default_factory=Pipeline.default)
    step_seconds: float = STEP_SECONDS  # time limit of plan and of render (off_loop)
    policy: Policy = field(default_factory=lambda: Policy())
    # resourceVersion we last wrote per owned object: events carrying it are our own echo.
    written: dict[tuple[str, str, str], str] = field(default_factory=dict)
    _owned_keys: dict[tuple[str, str], set[tuple[str, str, str]]] = field(default_factory=dict)
    _locks: dict[tuple[str, str], asyncio.Lock] = field(default_factory=dict)
    # generation whose manifests passed a server-side dry-run, per LLMService
    _verified: dict[tuple[str, str], int] = field(default_factory=dict)
    # generation after whose apply stale objects were pruned, per LLMService
    _pruned: dict[tuple[str, str], tuple[int, frozenset[tuple[str, str]]]] = field(
        default_factory=dict
    )
    # consecutive transient API failures per LLMService (the backoff and ApplyRetrying)
    _failures: dict[tuple[str, str], int] = field(default_factory=dict)
    # derived object names per LLMService, across LLMServices (controller/names.py)
    names: NameClaims = field(default_factory=NameClaims)
    # uid per LLMService the watch saw deleted: a pass in flight writes nothing more for it
    _deleted: dict[tuple[str, str], str] = field(default_factory=dict)
    clock: Callable[[], float] = time.time  # the fallback's deadlines (spec.gpu.type auto)
    # seconds until an LLMService's fallback wants another look (controller/gpu_placement.py)
    _rechecks: dict[tuple[str, str], float] = field(default_factory=dict)

    def recheck_in(self, namespace: str, name: str) -> float | None:
        """When the last pass asked to be run again (a GPU deadline or dwell), if it did."""
        return self._rechecks.get((namespace, name))

    # the one plan per LLMService generation, read by the autoscaler (controller/plans.py)
    plans: Plans = field(default_factory=Plans)

    def lock(self, namespace: str, name: str) -> asyncio.Lock:
        return self._locks.setdefault((namespace, name), asyncio.Lock())

    def deleted(self, namespace: str, name: str, uid: str) -> None:
        """The watch saw the LLMService go. A pass holding its lock stops before its next
        write; its per-LLMService state goes now if none does."""
        self._deleted[(namespace, name)] = uid
        lock = self._locks.get((namespace, name))
        if lock is None or not lock.locked():
            self.forget(namespace, name)

    def forget(self, namespace: str, name: str) -> None:
        self._deleted.pop((namespace, name), None)
        self.plans.forget((namespace, name))
        self._locks.pop((namespace, name), None)
        self._verified.pop((namespace, name), None)
        self._pruned.pop((namespace, name), None)
        self._failures.pop((namespace, name), None)
        self._rechecks.pop((namespace, name), None)
        self.names.forget((namespace, name))
        for key in self._owned_keys.pop((namespace, name), set()):
            self.written.pop(key, None)

    def forget_object(self, kind: str, namespace: str, name: str) -> None:
        """An owned object was deleted: its name must be checked again before a write."""
        key = (kind, namespace, name)
        self.written.pop(key, None)
        self.names.release(key)
        for keys in self._owned_keys.values():
            keys.discard(key)

    def is_own_echo(self, kind: str, namespace: str, name: str, resource_version: str) -> bool:
        return self.written.get((kind, namespace, name)) == resource_version

    async def reconcile(
        self,
        body: Mapping[str, Any],
        logger: logging.Logger | logging.LoggerAdapter[Any],
        retry: int = 0,
    ) -> dict[str, Any] | None:
        """Reconcile and write status; None if the LLMService is gone or being deleted.

        Raises kopf.TemporaryError on retryable API errors. The object is re-read under the
        lock: a pass that waited for another one must start from that one's status (its
        conditions and transition times), not from the older body of its own event.
        """
        meta = body.get("metadata", {})
        namespace, name = meta.get("namespace", ""), meta.get("name", "")
        try:
            return await self._locked(namespace, name, logger)
        except Gone:
            self.metrics.reconciles.labels("gone").inc()
            logger.info("%s/%s was deleted during its reconcile: nothing applied", namespace, name)
            self.forget(namespace, name)
            return None

    async def _locked(
        self, namespace: str, name: str, logger: logging.Logger | logging.LoggerAdapter[Any]
    ) -> dict[str, Any] | None:
        async with self.lock(namespace, name):
            started = time.perf_counter()
            fresh: Mapping[str, Any] | None = None
            try:
                fresh = await self.kube.get(API_VERSION, KIND, namespace, name)
                if fresh is None or fresh["metadata"].get("deletionTimestamp"):
                    return None
                new_status, result = await self._reconcile(fresh, logger)
            except ApiError as error:
                if not error.transient:
                    self.metrics.reconciles.labels("error").inc()
                    raise
                self.metrics.reconciles.labels("retry").inc()
                self.metrics.reconcile_errors.labels(f"{error.status // 100}xx").inc()
                failures = self._failures.get((namespace, name), 0) + 1
                self._failures[(namespace, name)] = failures
                delay = retry_delay(error, failures)
                if failures >= REPORT_AFTER_FAILURES and fresh is not None:
                    await self._report_retrying(fresh, error, delay, logger)
                raise kopf.TemporaryError(redact(str(error), fresh), delay=delay) from error
            except Gone:
                raise  # reconcile() counts it
            except Exception:
                self.metrics.reconciles.labels("error").inc()  # a bug: kopf retries it
                raise
            finally:
                self.metrics.reconcile_duration.observe(time.perf_counter() - started)
            self.metrics.reconciles.labels(result).inc()
            self._failures.pop((namespace, name), None)
            return new_status

    async def _report_retrying(
        self,
        body: Mapping[str, Any],
        error: ApiError,
        delay: float,
        logger: logging.Logger | logging.LoggerAdapter[Any],
    ) -> None:
        """A persistent API error becomes Degraded/ApplyRetrying with the last error, so the
        LLMService says why nothing changes instead of showing an old or empty status. Best
        effort: the apiserver that fails the apply may fail this write too."""
        meta = body["metadata"]
        previous = dict(body.get("status") or {})
        message = (
            f"the API server keeps failing; retrying every {delay:.0f}s at most. "
            f"Last error: {redact(str(error), body)}"
        )
        observed = st.Observed(
            generation=int(previous.get("observedGeneration") or 0),
            degraded=st.Condition("Degraded", True, "ApplyRetrying", message[:1000]),
        )
        try:
            # Through the one status writer: composed onto the latest status, so the
            # autoscaler's part is never reverted.
            await write_status(
                self.kube,
                meta["namespace"],
                meta["name"],
                lambda obj: st.reconciler_status(obj.get("status") or {}, observed),
            )
        except ApiError as status_error:
            logger.warning("could not report ApplyRetrying: %s", status_error)

    async def _reconcile(
        self, body: Mapping[str, Any], logger: logging.Logger | logging.LoggerAdapter[Any]
    ) -> tuple[dict[str, Any], str]:
        meta = body["metadata"]
        namespace, name = meta["namespace"], meta["name"]
        previous = dict(body.get("status") or {})
        generation = int(meta.get("generation") or 0)
        corrected: list[str] = []
        kept: KeptPlan | None = None
        try:
            observed, kept = await self._apply(body, logger, corrected)
            result = "applied"
        except Refused as refused:
            message = redact(refused.message, body)
            observed = st.Observed(
                generation=generation,
                degraded=st.Condition("Degraded", True, refused.reason, message),
                planned=refused.planned,
            )
            result = "degraded"
        except ApiError as error:
            if error.transient:
                raise
            # 4xx (422 invalid, 403 forbidden...): retrying will not help; tell the user.
            self.metrics.reconcile_errors.labels(f"{error.status // 100}xx").inc()
            message = redact(str(error), body)
            if error.status == 403:
                message = f"{message[:600]}; {FORBIDDEN_FIX}"
            observed = st.Observed(
                generation=generation,
                degraded=st.Condition("Degraded", True, "ApplyFailed", message[:1000]),
            )
            result = "degraded"
        new_status = st.reconciler_status(previous, observed)
        try:
            # Composed again onto the latest status if the autoscaler wrote in between.
            written = await write_status(
                self.kube,
                namespace,
                name,
                lambda obj: st.reconciler_status(obj.get("status") or {}, observed),
                body=body,
            )
            if written is not None:
                previous, new_status = dict(written.old), dict(written.new)
        except ApiError as error:
            if error.transient:
                raise
            # Rejected status (an older CRD schema?): nothing to retry; say so loudly.
            self.metrics.reconcile_errors.labels(f"{error.status // 100}xx").inc()
            logger.error(
                "status of %s/%s was rejected: %s", namespace, name, redact(str(error), body)
            )
        if kept is not None:  # applied and reported: the plan the workload runs with
            self.plans.keep((namespace, name), kept.uid, kept.generation, kept.config, kept.plan)
        self._record_scale(previous, new_status)
        self._post_events(body, previous, new_status, generation)
        for warning, reason, message in observed.events:
            _post(kopf.warn if warning else kopf.info, body, reason, message)
        if corrected and previous.get("observedGeneration") == generation:
            # Same spec, yet our apply changed objects: someone edited or deleted them.
            _post(kopf.info, body, "DriftCorrected", "re-applied " + ", ".join(corrected))
        return new_status, result

    async def _apply(
        self,
        body: Mapping[str, Any],
        logger: logging.Logger | logging.LoggerAdapter[Any],
        corrected: list[str],
    ) -> tuple[st.Observed, KeptPlan]:
        """read -> plan and render -> preconditions -> write -> prune, for one generation;
        with the plan applied, for the reconciler to keep once it is reported."""
        meta = body["metadata"]
        namespace, name = meta["namespace"], meta["name"]
        generation = int(meta.get("generation") or 0)
        inputs = await self._inputs(body)
        seen = await gpu_placement.observe_cluster(
            self.kube, inputs.service, body.get("status") or {}, self.clock()
        )
        decider = (
            None if seen is None else gpu_placement.Decider(seen, inputs.service.spec.replicas)
        )
        state = await self._desired(body, inputs, decider)
        planned = planned_condition(state.plan)
        owned = await self._preconditions(body, inputs, state.manifests, planned)
        # Planning and the dry-run take time: a delete meanwhile must not be undone by
        # children re-created for an owner that is gone.
        await self._still_there(body)
        applied = await self._write(body, owned, corrected)
        logger.debug("applied %d manifests for %s/%s", len(applied), namespace, name)
        observed = _observe(applied, generation, planned, state.plan, namespace)
        rendered = frozenset((m["kind"], m["metadata"]["name"]) for m in owned)
        if self._pruned.get((namespace, name)) != (generation, rendered):
            # Once per generation (and after a restart), or when the set of objects changed
            # within one (spec.gpu.type auto moved replicas off a GPU type): a drift pass of
            # the same objects has nothing to prune.
            note = await self._prune(body, owned, inputs, corrected)
            self._pruned[(namespace, name)] = (generation, rendered)
            observed = dataclasses.replace(observed, extra=note)
        autoscaling = autoscaling_condition(inputs.service, body)
        if autoscaling is not None:
            observed = dataclasses.replace(observed, autoscaling=autoscaling)
        observed = self._gpu_observed(observed, state.plan, decider, body)
        kept = KeptPlan(str(meta["uid"]), generation, config_digest(inputs.config), state.plan)
        return dataclasses.replace(observed, routing=inputs.routing.condition), kept

    def _gpu_observed(
        self,
        observed: st.Observed,
        plan: Plan,
        decider: gpu_placement.Decider | None,
        body: Mapping[str, Any],
    ) -> st.Observed:
        """status.gpu, the GpuFallback condition and Events of spec.gpu.type auto; when the
        spec went back to one type, the condition says so (status.gpu is dropped)."""
        meta = body["metadata"]
        key = (meta["namespace"], meta["name"])
        self._rechecks.pop(key, None)
        if plan.choice is None:
            had = any(
                c.get("type") == gpu_placement.CONDITION
                for c in (body.get("status") or {}).get("conditions") or []
            )
            if not had:
                return observed
            fixed = st.Condition(
                gpu_placement.CONDITION, False, "FixedType", "spec.gpu.type names one type"
            )
            return dataclasses.replace(observed, gpu_fallback=fixed)
        placement = decider.placement if decider is not None else None
        seen = decider.seen if decider is not None else None
        extra = {**observed.extra, "gpu": gpu_placement.gpu_status(plan, placement, seen)}
        if placement is None:
            return dataclasses.replace(observed, extra=extra)
        if placement.next_check_seconds is not None:
            self._rechecks[key] = placement.next_check_seconds
        events = tuple((e.warning, e.reason, e.message) for e in placement.events)
        return dataclasses.replace(
            observed,
            extra=extra,
            gpu_fallback=gpu_placement.condition(placement),
            events=events,
        )

    async def _inputs(self, body: Mapping[str, Any]) -> _Inputs:
        """The spec, the model config it points to, and what the cluster serves."""
        try:
            service = self.pipeline.parse(body)
        except Exception as error:  # any parse failure is the user's spec, not our crash
            raise Refused("InvalidSpec", _one_line(error)) from error
        namespace = body["metadata"]["namespace"]
        config = await self._model_config(config_map_ref(service), namespace)
        lws = await self.kube.has_resource(LWS_API, LWS_PLURAL)
        monitoring = await self.kube.has_resource(MONITORING_API, MONITORING_PLURAL)
        routing = await routing_state(self.kube, service, body.get("status") or {})
        steps = self.pipeline
        cluster = Cluster(monitoring, lws, routing.available, steps.images, steps.picker_role)
        return _Inputs(service, config, cluster, routing)

    async def _desired(
        self,
        body: Mapping[str, Any],
        inputs: _Inputs,
        decider: gpu_placement.Decider | None = None,
    ) -> Desired:
        """Plan (once per generation and model config: later passes reuse the plan kept
        when it was applied, controller/plans.py) and render off the event loop; a failure
        or a refusal is Refused."""
        steps, lws = self.pipeline, inputs.cluster.lws
        meta = body["metadata"]
        key = (str(meta["namespace"]), str(meta["name"]))
        uid, generation = str(meta.get("uid") or ""), int(meta.get("generation") or 0)
        digest = config_digest(inputs.config)
        kept = self.plans.kept(key, uid, generation, digest)

        def planned(outcome: str) -> None:  # counts the plans made, not the ones reused
            if kept is None:
                self.metrics.plans.labels(outcome).inc()

        def admit(service: LLMService, plan: Plan) -> None:
            """Refusals of a good plan, before the render's own errors: the allowlists,
            and a missing LeaderWorkerSet, which the operator waits for (a recheck)."""
            self.policy.check(service, plan, planned_condition(plan))
            if plan.nodes_per_replica > 1 and not lws:
                raise Refused(
                    "LeaderWorkerSetMissing",
                    f"the plan needs {plan.nodes_per_replica} nodes per replica, which runs "
                    f"as a LeaderWorkerSet, but its API ({LWS_API}) is not served: "
                    f"{LWS_INSTALL}",
                    planned_condition(plan),
                )

        service, config, cluster = inputs.service, inputs.config, inputs.cluster
        try:
            state = await off_loop(
                lambda: desired(
                    service,
                    config,
                    cluster,
                    plan=steps.plan,
                    admit=admit,
                    split=decider,
                    planned=kept,
                ),
                self.step_seconds,
            )
        except (StepFailed, TooSlow) as error:
            failed_plan = error.plan if isinstance(error, StepFailed) else None
            if failed_plan is None:  # the plan failed (or the whole step ran too long)
                planned("failed")
                message = _one_line(error)
                failed = st.Condition("Planned", False, "PlanFailed", message)
                raise Refused("PlanFailed", message, failed) from error
            planned("ok")
            raise Refused(
                "RenderFailed", _one_line(error), planned_condition(failed_plan)
            ) from error
        except Refused as refused:
            if refused.planned is not None:  # refused by admit: the plan itself was made
                planned("ok")
            raise
        planned("ok")
        if not lws and any(m.get("kind") == "LeaderWorkerSet" for m in state.manifests):
            raise Refused("LeaderWorkerSetMissing", LWS_INSTALL, planned_condition(state.plan))
        return state

    async def _preconditions(
        self,
        body: Mapping[str, Any],
        inputs: _Inputs,
        manifests: Sequence[Mapping[str, Any]],
        planned: st.Condition,
    ) -> list[dict[str, Any]]:
        """The manifests owned by the LLMService, once every name is free or ours and the
        API server accepted all of them in a dry-run: nothing half-created."""
        meta = body["metadata"]
        namespace, name = meta["namespace"], meta["name"]
        generation = int(meta.get("generation") or 0)
        owned = [own(m, body) for m in manifests]
        clashes = self.names.claim((namespace, name), owned)
        if clashes:
            raise Refused("NameConflict", "; ".join(clashes), planned)
        known = self._owned_keys.get((namespace, name), set())
        taken = await ownership.conflicts(self.kube, owned, body, known)
        if taken:
            raise Refused("NameConflict", "; ".join(taken), planned)
        if self._verified.get((namespace, name)) != generation:
            # The API server (schema, admission webhooks, quotas) sees every manifest of a
            # new generation before the first one is written.
            await asyncio.gather(*(self.kube.apply(m, dry_run=True) for m in owned))
            self._verified[(namespace, name)] = generation
        return owned

    async def _write(
        self, body: Mapping[str, Any], owned: Sequence[dict[str, Any]], corrected: list[str]
    ) -> list[dict[str, Any]]:
        """Server-side apply, in order; `corrected` gets what someone else had changed."""
        namespace, name = body["metadata"]["namespace"], body["metadata"]["name"]
        applied: list[dict[str, Any]] = []
        for manifest in owned:
            self._check_deleted(body)
            key = (manifest["kind"], namespace, manifest["metadata"]["name"])
            before = self.written.get(key)
            result = await self.kube.apply(manifest)
            self._remember((namespace, name), result)
            if before is not None and before != result["metadata"].get("resourceVersion"):
                corrected.append(f"{key[0]}/{key[2]}")
            applied.append(result)
        return applied

    async def _prune(
        self,
        body: Mapping[str, Any],
        owned: Sequence[dict[str, Any]],
        inputs: _Inputs,
        corrected: list[str],
    ) -> dict[str, Any]:
        """Delete what this generation no longer renders; status.retainedClaims."""
        namespace = body["metadata"]["namespace"]
        cluster = inputs.cluster
        served = {LWS_API: cluster.lws, MONITORING_API: cluster.monitoring}
        pruned = await ownership.prune(self.kube, body, owned, {**served, **inputs.routing.served})
        for deleted in pruned.deleted:
            kind, _, obj_name = deleted.partition("/")
            self.forget_object(kind, namespace, obj_name)
            corrected.append(f"{deleted} (deleted: no longer rendered)")
        return retained_note(pruned.retained, body.get("status") or {})

    async def _still_there(self, body: Mapping[str, Any]) -> None:
        """Gone unless the LLMService of this pass (by uid) still exists, undeleted."""
        meta = body["metadata"]
        self._check_deleted(body)
        fresh = await self.kube.get(API_VERSION, KIND, meta["namespace"], meta["name"])
        fresh_meta = (fresh or {}).get("metadata") or {}
        if (
            fresh is None
            or fresh_meta.get("deletionTimestamp")
            or fresh_meta.get("uid") != meta["uid"]
        ):
            raise Gone()

    def _check_deleted(self, body: Mapping[str, Any]) -> None:
        meta = body["metadata"]
        if self._deleted.get((meta["namespace"], meta["name"])) == meta["uid"]:
            raise Gone()

    async def _model_config(
        self, ref: tuple[str, str] | None, namespace: str
    ) -> dict[str, Any] | None:
        """A model config.json kept in a ConfigMap, when the spec points to one."""
        if ref is None:
            return None
        cm_name, key = ref
        cm = await self.kube.get("v1", "ConfigMap", namespace, cm_name)
        if cm is None:
            raise Refused(
                "ConfigMapNotFound",
                f"spec.model.configMapRef.name: ConfigMap {namespace}/{cm_name} does not exist; "
                "create it with the model's config.json or fix the name",
            )
        raw = (cm.get("data") or {}).get(key)
        if raw is None:
            raise Refused(
                "ConfigMapKeyMissing",
                f"spec.model.configMapRef.key: ConfigMap {namespace}/{cm_name} has no key "
                f"{key!r}; keys are {sorted(cm.get('data') or {})}",
            )
        try:
            return model_config(str(raw))
        except ValueError as error:
            raise Refused(
                "ConfigMapInvalid",
                f"ConfigMap {namespace}/{cm_name} key {key!r} is {error}; "
                "put the model's config.json there verbatim",
            ) from error

    def _remember(self, owner: tuple[str, str], obj: Mapping[str, Any]) -> None:
        meta = obj.get("metadata") or {}
        key = (str(obj.get("kind")), str(meta.get("namespace")), str(meta.get("name")))
        if meta.get("resourceVersion"):
            self.written[key] = str(meta["resourceVersion"])
            self._owned_keys.setdefault(owner, set()).add(key)

    def _record_scale(self, previous: Mapping[str, Any], new: Mapping[str, Any]) -> None:
        old, now = previous.get("replicas"), new.get("replicas")
        if isinstance(old, int) and isinstance(now, int) and old != now:
            self.metrics.scale_events.labels("up" if now > old else "down").inc()

    def _post_events(
        self, body: Mapping[str, Any], previous: Mapping[str, Any], new: Mapping[str, Any], gen: int
    ) -> None:
        flipped = st.transitions(previous.get("conditions") or [], new["conditions"])
        for cond in flipped:
            kind, status = cond["type"], cond["status"]
            if kind == "Planned" and status == "True":
                _post(kopf.info, body, "Planned", cond["message"])
            elif kind == "Degraded" and status == "True":
                _post(kopf.warn, body, "Degraded", cond["message"])
            elif kind == "Ready" and status == "True":
                _post(kopf.info, body, "Ready", cond["message"])
            elif kind == "Routing" and status == "False" and cond["reason"] != "Disabled":
                _post(kopf.warn, body, cond["reason"], cond["message"])
        if new.get("phase") != "Degraded" and previous.get("observedGeneration") != gen:
            _post(kopf.info, body, "Applied", f"generation {gen} applied")


class TooSlow(Exception):
    """A pure step ran past its time limit (a spec that slipped past the bounds)."""


async def off_loop(step: Callable[[], T], limit: float | None = None) -> T:
    """Run a pure, CPU-bound step (plan, render) on a worker thread with a time limit.

    On the event loop, a slow step would stall every other LLMService, kopf's watches and
    /healthz. A thread cannot be killed: one that overruns keeps running in the background
    (bounded architecture fields make that a safety net, not a path), but the reconcile
    answers at once.
    """
    limit = STEP_SECONDS if limit is None else limit
    try:
        return await asyncio.wait_for(asyncio.to_thread(step), limit)
    except TimeoutError as error:
        raise TooSlow(
            f"sizing and rendering this spec took longer than {limit:.0f}s and was abandoned; "
            "check spec.model.config for implausible sizes (layers, heads, vocab)"
        ) from error


def retained_note(claims: Sequence[str], previous: Mapping[str, Any]) -> dict[str, Any]:
    """status.retainedClaims: model-cache PVCs kept by spec.storage.retain after storage was
    removed (they hold storage and weights until someone deletes them). None clears it."""
    if claims:
        return {"retainedClaims": sorted(claims)}
    return {"retainedClaims": None} if previous.get("retainedClaims") else {}


def autoscaling_condition(service: LLMService, body: Mapping[str, Any]) -> st.Condition | None:
    """Autoscaling as the spec says; once the autoscaler has reported, its condition stands."""
    if not service.spec.autoscaling.enabled:
        return st.Condition("Autoscaling", False, "Disabled", "spec.autoscaling.enabled is false")
    conditions = (body.get("status") or {}).get("conditions") or []
    current = next((c for c in conditions if c.get("type") == "Autoscaling"), None)
    if current is not None and current.get("reason") != "Disabled":
        return None
    return st.Condition("Autoscaling", None, "AwaitingMetrics", "no autoscaling decision yet")


def own(manifest: Mapping[str, Any], owner: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of the manifest owned by the LLMService (deletion cascades) and labelled as ours."""
    result = json.loads(json.dumps(manifest))  # deep copy of plain JSON data
    meta = result.setdefault("metadata", {})
    owner_meta = owner["metadata"]
    meta.setdefault("namespace", owner_meta["namespace"])
    labels = meta.setdefault("labels", {})
    labels.update(MANAGED_BY)
    labels.setdefault(INSTANCE_LABEL, owner_meta["name"])
    meta["ownerReferences"] = [
        {
            "apiVersion": owner.get("apiVersion", API_VERSION),
            "kind": owner.get("kind", KIND),
            "name": owner_meta["name"],
            "uid": owner_meta["uid"],
            "controller": True,
            "blockOwnerDeletion": True,
        }
    ]
    result.pop("status", None)  # status belongs to the object's controller, never applied
    return dict(result)


def planned_condition(plan: Plan) -> st.Condition:
    return st.Condition("Planned", True, "PlanComputed", plan.reason)


def _observe(
    applied: Sequence[Mapping[str, Any]],
    generation: int,
    planned: st.Condition,
    plan: Plan,
    namespace: str,
) -> st.Observed:
    workloads = [o for o in applied if o.get("kind") in WORKLOAD_KINDS]
    # spec.gpu.type auto: one engine workload per GPU type, labelled with it; else the first.
    typed = [w for w in workloads if GPU_TYPE_LABEL in (w["metadata"].get("labels") or {})]
    engines = typed or workloads[:1]
    service = next((o for o in applied if o.get("kind") == "Service"), None)
    replicas = ready = None
    selector = None
    if engines:
        replicas = sum(int((w.get("spec") or {}).get("replicas", 1)) for w in engines)
        ready = sum(int((w.get("status") or {}).get("readyReplicas") or 0) for w in engines)
        owner = engines[0]["metadata"].get("labels", {}).get(INSTANCE_LABEL)
        selector = f"{INSTANCE_LABEL}={owner}" if typed else _selector(engines[0])
    endpoint = None
    if service is not None:
        ports = (service.get("spec") or {}).get("ports") or [{}]
        port = ports[0].get("port", 80)
        endpoint = f"http://{service['metadata']['name']}.{namespace}.svc.cluster.local:{port}/v1"
    return st.Observed(
        generation=generation,
        planned=planned,
        plan_summary=plan_summary(plan),
        replicas=replicas,
        ready_replicas=ready,
        selector=selector,
        endpoint=endpoint,
    )


def _selector(workload: Mapping[str, Any]) -> str | None:
    labels = ((workload.get("spec") or {}).get("selector") or {}).get("matchLabels")
    if workload.get("kind") == "LeaderWorkerSet":
        hpa = (workload.get("status") or {}).get("hpaPodSelector")
        if hpa:
            return str(hpa)
        meta_labels = (workload.get("metadata") or {}).get("labels") or {}
        labels = {k: v for k, v in meta_labels.items() if k == INSTANCE_LABEL}
    if not labels:
        return None
    return ",".join(f"{k}={v}" for k, v in sorted(labels.items()))


def plan_summary(plan: Plan) -> dict[str, Any]:
    """status.plan: the API's PlanStatus view of the plan (camelCase, unset fields omitted)."""
    return PlanStatus.from_plan(plan).to_dict()


def _ref(body: Mapping[str, Any]) -> Any:
    """kopf's event posting takes any body-like mapping (it reads apiVersion/kind/metadata)."""
    return body


def _post(fn: PostEvent, body: Mapping[str, Any], reason: str, message: str) -> None:
    """Post a Kubernetes Event; a failure to post must never fail the reconcile."""
    try:
        fn(_ref(body), reason=reason, message=message[:1000])
    except LookupError:  # outside kopf's per-object context (no event queue): log only
        logging.getLogger("tokenfleet.events").info("%s: %s", reason, message)


def redact(text: str, body: Mapping[str, Any] | None) -> str:
    """`text` with every literal spec.engine.env value replaced by '***'. API errors echo
    the object they refused (env included) into messages, Events and logs that more
    people can read than the LLMService; valueFrom references carry no secret."""
    spec = (body or {}).get("spec") or {}
    env = ((spec.get("engine") or {}).get("env")) or []
    values = sorted(
        {str(e.get("value")) for e in env if isinstance(e, dict) and e.get("value")},
        key=len,
        reverse=True,  # longest first: a value containing another is hidden whole
    )
    for value in values:
        if len(value) >= 3:  # "1", "on": hiding them would garble the message, not protect it
            text = text.replace(value, "***")
    return text


def _one_line(error: BaseException) -> str:
    text = " ".join(str(error).split()) or type(error).__name__
    return text[:1000]
