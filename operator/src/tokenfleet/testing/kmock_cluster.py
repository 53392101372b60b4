"""kmock's KubernetesEmulator plus the apiserver behaviour the operator relies on.

kmock 0.8 stores objects and streams watch events, but merges every write naively. This
subclass adds, in one place: uid / resourceVersion / generation / creationTimestamp,
server-side apply (create-or-update, fields the manager stopped applying are removed, a
no-op apply changes nothing and emits no event), status-subresource writes, garbage
collection through ownerReferences (cascading delete), discovery of the CRDs, a
resourceVersion precondition on patches (a stale `metadata.resourceVersion` in the body
answers 409, as the apiserver's optimistic concurrency does), the `scale` subresource
(autoscaling/v1 Scale over spec.replicas / status.replicas / status.selector, as a CRD's
scale paths or a Deployment's), label-selector lists, and injectable API errors (409 / 5xx /
422) for the next N matching writes.

kmock stays the only emulated component; nothing here knows about tokenfleet.
"""

from __future__ import annotations

import asyncio
import copy
import datetime
import itertools
import json
import re
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import aiohttp.web
import attrs
import jsonpatch
from kmock import KubernetesEmulator, KubernetesError, ResourceInfo, action, resource
from kmock._internal import apps, dicts

APPLY = "application/apply-patch+yaml"
LLMSERVICES = "tokenfleet.dev/v1alpha1/llmservices"
LWS = "leaderworkerset.x-k8s.io/v1/leaderworkersets"
PODMONITORS = "monitoring.coreos.com/v1/podmonitors"
INFERENCEPOOLS = "inference.networking.k8s.io/v1/inferencepools"
HTTPROUTES = "gateway.networking.k8s.io/v1/httproutes"

# (group/version/plural, kind, has a status subresource)
BUILTIN = (
    ("apps/v1/deployments", "Deployment", True),
    ("v1/pods", "Pod", True),
    ("v1/services", "Service", True),
    ("v1/configmaps", "ConfigMap", False),
    ("v1/persistentvolumeclaims", "PersistentVolumeClaim", True),
    ("v1/events", "Event", False),
    ("v1/namespaces", "Namespace", True),
    ("policy/v1/poddisruptionbudgets", "PodDisruptionBudget", True),
    ("v1/serviceaccounts", "ServiceAccount", False),
    ("rbac.authorization.k8s.io/v1/roles", "Role", False),
    ("rbac.authorization.k8s.io/v1/rolebindings", "RoleBinding", False),
    (LLMSERVICES, "LLMService", True),
)
PEERINGS = "kopf.dev/v1/clusterkopfpeerings"  # a cluster-wide operator's leader election
NS_PEERINGS = "kopf.dev/v1/kopfpeerings"  # a namespaced operator's
OPTIONAL = {
    LWS: ("LeaderWorkerSet", True),
    PODMONITORS: ("PodMonitor", False),
    INFERENCEPOOLS: ("InferencePool", True),
    HTTPROUTES: ("HTTPRoute", True),
    PEERINGS: ("ClusterKopfPeering", False),
    NS_PEERINGS: ("KopfPeering", False),
}
VERBS = {"create", "delete", "get", "list", "patch", "update", "watch"}
SCALABLE = {"deployments", "llmservices"}  # kinds with a scale subresource
CLUSTER_SCOPED = {"namespaces", "clusterkopfpeerings"}


@dataclass
class Fault:
    method: str
    path: re.Pattern[str]
    status: int
    times: int
    message: str
    dry_run: bool | None = None  # None: any request; True / False: only (non-)dry-runs
    drop: bool = False  # close the connection without an answer instead


@attrs.define(kw_only=True)
class Cluster(KubernetesEmulator):
    _rv: Iterator[int] = attrs.field(factory=lambda: itertools.count(1), init=False)
    _last_rv: int = attrs.field(default=0, init=False)
    # Every watch event per resource with its resourceVersion, so a watch that starts from
    # a list's resourceVersion gets what happened in between (as the apiserver does).
    _log: dict[Any, list[tuple[int, dict[str, Any]]]] = attrs.field(factory=dict, init=False)
    _applied: dict[tuple[Any, ...], dict[str, Any]] = attrs.field(factory=dict, init=False)
    conflicts: list[str] = attrs.field(factory=list, init=False)  # paths answered 409 (stale RV)
    _faults: list[Fault] = attrs.field(factory=list, init=False)
    writes: list[tuple[str, str]] = attrs.field(factory=list, init=False)  # (method, path)
    _gates: list[tuple[str, re.Pattern[str], asyncio.Event, bool | None]] = attrs.field(
        factory=list, init=False
    )
    _watchers: set[asyncio.Task[Any]] = attrs.field(factory=set, init=False)
    held: int = attrs.field(default=0, init=False)  # requests waiting on a hold() gate now

    def __attrs_post_init__(self) -> None:
        super().__attrs_post_init__()
        for key, kind, status in BUILTIN:
            self.declare(key, kind, status)

    # --- test-facing helpers --------------------------------------------------------------

    def declare(self, key: str, kind: str, status: bool = True) -> None:
        plural = key.rsplit("/", 1)[-1]
        self.resources[key] = ResourceInfo(
            kind=kind,
            namespaced=plural not in CLUSTER_SCOPED,
            verbs=VERBS,
            subresources=({"status"} if status else set())
            | ({"scale"} if plural in SCALABLE else set()),
        )

    def install(self, key: str) -> None:
        """Install an optional CRD (LWS, PodMonitor) so discovery serves it."""
        kind, status = OPTIONAL[key]
        self.declare(key, kind, status)

    def fail(
        self,
        method: str,
        path: str,
        status: int,
        times: int = 1,
        message: str = "injected",
        *,
        dry_run: bool | None = None,
        drop: bool = False,
    ) -> None:
        """The next `times` requests with this method and a path matching `path` fail
        (only dry-runs, or only real writes, when dry_run says so; drop: the connection
        is closed without an answer, as by a load balancer)."""
        fault = Fault(method.upper(), re.compile(path), status, times, message, dry_run, drop)
        self._faults.append(fault)

    def hold(self, method: str, path: str, *, dry_run: bool | None = None) -> asyncio.Event:
        """Requests with this method and path (dry-runs or not, when dry_run says) wait,
        unanswered, until the event is set."""
        gate = asyncio.Event()
        self._gates.append((method.upper(), re.compile(path), gate, dry_run))
        return gate

    def cut_watches(self) -> int:
        """End every open watch stream now (an apiserver restart, a load balancer's idle
        timeout); clients must resume from their last resourceVersion. Returns how many."""
        tasks = [t for t in self._watchers if not t.done()]
        for task in tasks:
            task.cancel()
        return len(tasks)

    def clear_faults(self) -> None:
        self._faults.clear()

    # Shadows kmock's HTTP helper get(url) on purpose: the tests read stored objects by key
    # far more often than they send a raw GET.
    def get(  # type: ignore[override]
        self, key: str, namespace: str | None, name: str
    ) -> dict[str, Any] | None:
        k = (resource(key), namespace, name)
        if k not in self.objects or self.objects[k].deleted:
            return None
        return copy.deepcopy(self.objects[k].raw)

    def writes_of(self, plural: str) -> list[tuple[str, str]]:
        return [(m, p) for m, p in self.writes if f"/{plural}" in p]

    def items(self, key: str) -> list[dict[str, Any]]:
        res = resource(key)
        return [
            copy.deepcopy(obj.raw)
            for (r, _, _), obj in self.objects.items()
            if r == res and not obj.deleted
        ]

    # --- the apiserver ------------------------------------------------------------------

    async def _handle(self, request: Any) -> aiohttp.web.StreamResponse:
        if request.resource is None or request.action is None or not request.resource.plural:
            return await apps.RawHandler._handle(self, request)  # discovery, /version
        method, path = str(request.method.value).upper(), request.url.path
        dry_run = request.params.get("dryRun") == "All"
        for gate_method, gate_path, gate, gate_dry in self._gates:
            if (
                gate_method == method
                and gate_path.search(path)
                and gate_dry in (None, dry_run)
                and not gate.is_set()
            ):
                self.held += 1
                try:
                    await gate.wait()
                finally:
                    self.held -= 1
        for fault in self._faults:
            if (
                fault.times > 0
                and fault.method == method
                and fault.path.search(path)
                and fault.dry_run in (None, dry_run)
            ):
                fault.times -= 1
                if fault.drop:
                    request._raw_request.transport.close()
                    raise ConnectionResetError("injected: connection dropped")
                return await self._render_error(
                    KubernetesError(status=fault.status, reason="Injected", message=fault.message)
                )
        if request.action in (action.CREATE, action.UPDATE) and isinstance(request.data, dict):
            problem = validate_object(request.resource.plural, request.data)
            if problem is not None:
                return await self._render_error(KubernetesError(*problem))
            if dry_run:  # validated, nothing stored, no event (dryRun=All)
                return aiohttp.web.json_response(copy.deepcopy(request.data))
        # Served directly rather than through kmock's reaction DSL, whose matching looks at
        # the whole request history and turns quadratic over a 500-object benchmark.
        try:
            if request.action == action.WATCH:
                return await self._watch(request)
            if request.action == action.LIST:
                return aiohttp.web.json_response(await self._serve_list(request))
            if request.action == action.FETCH:
                found = await self._serve_fetch(request)
                if request.subresource == "scale":
                    found = _scale_of(found)
                return aiohttp.web.json_response(found)
            async with self._lock:
                events = self._mutate(request)
                if events:
                    self.writes.append((method, path))
                for res, event in events:
                    rv = int(event["object"]["metadata"]["resourceVersion"])
                    self._log.setdefault(res, []).append((rv, event))
                    await self._buses[res].put(event)
            if request.action == action.CREATE:
                payload = await self._serve_create(request)
            elif request.action == action.UPDATE:
                payload = await self._serve_update(request)
            else:
                payload = await self._serve_delete(request)
            if request.subresource == "scale":
                payload = _scale_of(payload)
            return aiohttp.web.json_response(payload, status=201 if method == "POST" else 200)
        except KubernetesError as error:
            return await self._render_error(error)

    async def _watch(self, request: Any) -> aiohttp.web.StreamResponse:
        response = aiohttp.web.StreamResponse()
        response.content_type = "application/json"
        await response.prepare(request._raw_request)
        timeout = float(request.params.get("timeoutSeconds") or 0) or None
        bus = self._buses[request.resource]
        marker = None
        task = asyncio.current_task()
        if task is not None:
            self._watchers.add(task)
        try:
            async with asyncio.timeout(timeout):
                async with self._lock:
                    # Mark the bus before the snapshot, under the writers' lock: no event
                    # between the two is lost (a real watch resumes from a resourceVersion).
                    marker = await bus.mark()
                    since = request.params.get("resourceVersion") or "0"
                    if since.isdigit() and int(since) > 0:
                        snapshot = [
                            event
                            for rv, event in self._log.get(request.resource, [])
                            if rv > int(since)
                            and request.namespace
                            in (None, event["object"]["metadata"].get("namespace"))
                        ]
                    else:
                        snapshot = [
                            {"type": "ADDED", "object": copy.deepcopy(obj.raw)}
                            for (res, ns, _), obj in self.objects.items()
                            if res == request.resource
                            and not obj.deleted
                            and request.namespace in (None, ns)
                        ]
                for event in snapshot:
                    await response.write(json.dumps(event).encode() + b"\n")
                async for event in bus.stream(since=marker):
                    ns = event.get("object", {}).get("metadata", {}).get("namespace")
                    if request.namespace in (None, ns):
                        await response.write(json.dumps(event).encode() + b"\n")
        except (TimeoutError, ConnectionResetError, asyncio.CancelledError):
            pass
        finally:
            self._watchers.discard(task)
            if marker is not None:
                await bus.unmark(marker)
        return response

    async def _serve_list(self, request: Any) -> Any:
        selector = _label_selector(request.params.get("labelSelector") or "")
        items = [
            obj.raw
            for (res, ns, _), obj in self.objects.items()
            if res == request.resource
            and not obj.deleted
            and request.namespace in (None, ns)
            and selector.items() <= ((obj.raw.get("metadata") or {}).get("labels") or {}).items()
        ]
        return {"metadata": {"resourceVersion": str(self._last_rv)}, "items": items}

    def _next_rv(self) -> str:
        self._last_rv = next(self._rv)
        return str(self._last_rv)

    # kmock scans every object per read; 500-LLMService benchmarks need dict lookups.
    def _lookup(self, request: Any, name: str | None = None) -> Any:
        res, ns = request.resource, request.namespace
        if res.plural in CLUSTER_SCOPED:
            ns = None
        key = (res, ns, name or request.name)
        return self.objects[key] if key in self.objects else None  # noqa: SIM401 (no .get)

    async def _serve_fetch(self, request: Any) -> Any:
        obj = self._lookup(request)
        if obj is None or obj.deleted:
            raise KubernetesError(404, "NotFound", f"{request.resource.plural} not found")
        return obj.raw

    async def _serve_create(self, request: Any) -> Any:
        obj = self._lookup(request, request.data.get("metadata", {}).get("name"))
        return obj.raw

    async def _serve_update(self, request: Any) -> Any:
        return self._lookup(request).last.raw

    async def _serve_delete(self, request: Any) -> Any:
        return self._lookup(request).last.raw

    def _mutate(self, request: Any) -> list[tuple[Any, dict[str, Any]]]:
        res, ns = request.resource, request.namespace
        if res.plural in CLUSTER_SCOPED:
            ns = None
        data: Any = request.data if isinstance(request.data, (dict, list)) else {}
        content_type = request.headers.get("Content-Type", "")
        if request.action == action.CREATE:
            name = data.get("metadata", {}).get("name") or f"gen-{uuid.uuid4().hex[:8]}"
            data.setdefault("metadata", {})["name"] = name
            key = (res, ns or data["metadata"].get("namespace"), name)
            if key in self.objects and not self.objects[key].deleted:
                raise KubernetesError(409, "AlreadyExists", f"{res.plural} {name!r} already exists")
            return [self._store(key, self._fresh(data, key[1]), "ADDED")]
        key = (res, ns, request.name)
        exists = key in self.objects and not self.objects[key].deleted
        if request.action == action.DELETE:
            if not exists:
                raise KubernetesError(404, "NotFound", f"{res.plural} {request.name!r} not found")
            uid = ((data.get("preconditions") if isinstance(data, dict) else None) or {}).get("uid")
            if uid and uid != self.objects[key].raw.get("metadata", {}).get("uid"):
                raise KubernetesError(409, "Conflict", f"precondition failed: UID in {uid}")
            return self._delete(key)
        if APPLY in content_type:
            return self._apply(key, data, request.params.get("fieldManager", ""), exists)
        if not exists:
            raise KubernetesError(404, "NotFound", f"{res.plural} {request.name!r} not found")
        old = self.objects[key].raw
        if isinstance(data, dict):
            expected = (data.get("metadata") or {}).get("resourceVersion")
            current = old.get("metadata", {}).get("resourceVersion")
            if expected is not None and str(expected) != str(current):
                self.conflicts.append(request.url.path)
                raise KubernetesError(
                    409,
                    "Conflict",
                    f"Operation cannot be fulfilled on {res.plural} {request.name!r}: the "
                    "object has been modified; please apply your changes to the latest version "
                    "and try again",
                )
        if request.subresource == "status" and isinstance(data, dict):
            data = {"status": data.get("status")}
        elif request.subresource == "scale" and isinstance(data, dict):
            replicas = (data.get("spec") or {}).get("replicas")
            if not isinstance(replicas, int) or replicas < 0:
                raise KubernetesError(422, "Invalid", f"spec.replicas: Invalid value: {replicas}")
            data = {"spec": {"replicas": replicas}}
        try:  # a dict is a merge patch, a list is a JSON patch (kopf uses both)
            new = dict(dicts.patch_dict(copy.deepcopy(old), data))
        except jsonpatch.JsonPatchException as error:  # e.g. a failed "test" op
            raise KubernetesError(422, "Invalid", f"the JSON patch failed: {error}") from error
        return self._update(key, old, new)

    def _apply(
        self, key: tuple[Any, ...], data: dict[str, Any], manager: str, exists: bool
    ) -> list[tuple[Any, dict[str, Any]]]:
        data = copy.deepcopy(data)
        data.pop("status", None)
        if not exists:
            self._applied[(*key, manager)] = copy.deepcopy(data)
            return [self._store(key, self._fresh(data, key[1]), "ADDED")]
        old = self.objects[key].raw
        previous = self._applied.get((*key, manager), {})
        new = _prune(copy.deepcopy(old), previous, data)
        new = _deep_merge(new, data)
        self._applied[(*key, manager)] = copy.deepcopy(data)
        return self._update(key, old, new)

    def _update(
        self, key: tuple[Any, ...], old: dict[str, Any], new: dict[str, Any]
    ) -> list[tuple[Any, dict[str, Any]]]:
        if new == old:
            return []  # a no-op write: same resourceVersion, no watch event (as the apiserver)
        meta = new.setdefault("metadata", {})
        for field in ("uid", "creationTimestamp", "name", "namespace"):
            if field in old.get("metadata", {}):
                meta[field] = old["metadata"][field]
        if _spec_of(new) != _spec_of(old):
            meta["generation"] = int(old["metadata"].get("generation", 1)) + 1
        meta["resourceVersion"] = self._next_rv()
        if meta.get("deletionTimestamp") and not meta.get("finalizers"):
            self.objects[key].create(new)
            return self._delete(key)
        return [self._store(key, new, "MODIFIED")]

    def _delete(self, key: tuple[Any, ...]) -> list[tuple[Any, dict[str, Any]]]:
        obj = self.objects[key]
        raw = copy.deepcopy(obj.raw)
        meta = raw.get("metadata", {})
        if meta.get("finalizers") and not meta.get("deletionTimestamp"):
            meta["deletionTimestamp"] = _now()
            meta["resourceVersion"] = self._next_rv()
            return [self._store(key, raw, "MODIFIED")]
        meta["resourceVersion"] = self._next_rv()
        obj.delete()
        for k in [k for k in self._applied if k[:3] == key]:
            self._applied.pop(k)
        events = [(key[0], {"type": "DELETED", "object": raw})]
        # The garbage collector: dependents whose ownerReferences point at this uid go too.
        uid = meta.get("uid")
        for dep_key, dep in list(self.objects.items()):
            if dep.deleted or dep_key == key:
                continue
            owners = dep.raw.get("metadata", {}).get("ownerReferences") or []
            if any(o.get("uid") == uid for o in owners):
                events += self._delete(dep_key)
        return events

    def _fresh(self, data: dict[str, Any], namespace: str | None) -> dict[str, Any]:
        meta = data.setdefault("metadata", {})
        if namespace:
            meta["namespace"] = namespace
        meta["uid"] = str(uuid.uuid4())
        meta["resourceVersion"] = self._next_rv()
        meta["generation"] = 1
        meta["creationTimestamp"] = _now()
        return data

    def _store(
        self, key: tuple[Any, ...], raw: dict[str, Any], kind: str
    ) -> tuple[Any, dict[str, Any]]:
        if key in self.objects:
            self.objects[key].create(raw)
        else:
            self.objects[key] = raw
        return key[0], {"type": kind, "object": copy.deepcopy(raw)}


LABEL_NAME = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
QUANTITY = re.compile(
    r"^([0-9]+(\.[0-9]*)?|\.[0-9]+)(m|k|M|G|T|P|E|Ki|Mi|Gi|Ti|Pi|Ei|[eE][0-9]+)?$"
)


def validate_object(plural: str, obj: dict[str, Any]) -> tuple[int, str, str] | None:
    """The few apiserver validations the operator's inputs can trip (status, reason,
    message naming the field, as the apiserver words them), and the 500 a duplicate env
    name caused on a real apiserver's server-side apply."""
    spec = obj.get("spec") or {}
    templates = [("metadata", obj.get("metadata") or {})]
    pod = (spec.get("template") or {}) if plural == "deployments" else {}
    if pod:
        templates.append(("spec.template.metadata", pod.get("metadata") or {}))
    for where, meta in templates:
        for key, value in (meta.get("labels") or {}).items():
            name = key.rpartition("/")[2]
            if not name or len(name) > 63 or not LABEL_NAME.match(name):
                return 422, "Invalid", f"{where}.labels: Invalid value: {key!r}: name part"
            if len(str(value)) > 63 or not LABEL_NAME.match(str(value)):
                return 422, "Invalid", f"{where}.labels: Invalid value: {value!r}"
    for i, container in enumerate((pod.get("spec") or {}).get("containers") or []):
        field = f"spec.template.spec.containers[{i}]"
        for kind, quantities in (container.get("resources") or {}).items():
            for res, value in (quantities or {}).items():
                if not QUANTITY.match(str(value)):
                    return 422, "Invalid", f"{field}.resources.{kind}[{res}]: Invalid value"
        names = [e.get("name") for e in container.get("env") or []]
        if len(names) != len(set(names)):
            return 500, "InternalError", "failed to create typed patch object: duplicate entries"
    if plural == "persistentvolumeclaims":
        size = str(((spec.get("resources") or {}).get("requests") or {}).get("storage", ""))
        number = re.match(r"^[0-9.]*", size)
        if not QUANTITY.match(size) or float((number.group() if number else "") or 0) <= 0:
            field = "spec.resources.requests[storage]"
            return 422, "Invalid", f"{field}: Invalid value: {size!r}: must be greater than zero"
    return None


def _label_selector(text: str) -> dict[str, str]:
    """Equality-based label selectors (k=v,k2=v2), the form the operator sends."""
    pairs = [part.split("=", 1) for part in text.split(",") if "=" in part]
    return {k.strip().rstrip("="): v.strip() for k, v in pairs}


def _spec_of(obj: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in obj.items() if k not in ("metadata", "status")}


def _deep_merge(base: dict[str, Any], patch: dict[str, Any]) -> dict[str, Any]:
    for key, value in patch.items():
        if isinstance(value, dict) and isinstance(base.get(key), dict):
            base[key] = _deep_merge(base[key], value)
        else:
            base[key] = copy.deepcopy(value)
    return base


def _prune(current: dict[str, Any], before: dict[str, Any], now: dict[str, Any]) -> dict[str, Any]:
    """Remove fields the manager applied before and no longer applies (SSA ownership)."""
    for key, value in before.items():
        if key not in now:
            current.pop(key, None)
        elif (
            isinstance(value, dict)
            and isinstance(now[key], dict)
            and isinstance(current.get(key), dict)
        ):
            current[key] = _prune(current[key], value, now[key])
    return current


def _now() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _scale_of(obj: dict[str, Any]) -> dict[str, Any]:
    """The autoscaling/v1 Scale view of an object (spec.replicas / status.replicas /
    status.selector: the paths of the LLMService CRD's scale subresource)."""
    meta = obj.get("metadata", {})
    status = obj.get("status") or {}
    selector = status.get("selector")
    if not isinstance(selector, str):  # a Deployment: its spec.selector's matchLabels
        labels = ((obj.get("spec") or {}).get("selector") or {}).get("matchLabels") or {}
        selector = ",".join(f"{k}={v}" for k, v in sorted(labels.items()))
    return {
        "apiVersion": "autoscaling/v1",
        "kind": "Scale",
        "metadata": {
            k: meta[k]
            for k in ("name", "namespace", "uid", "resourceVersion", "creationTimestamp")
            if k in meta
        },
        "spec": {"replicas": int((obj.get("spec") or {}).get("replicas") or 0)},
        "status": {"replicas": int(status.get("replicas") or 0), "selector": selector},
    }
