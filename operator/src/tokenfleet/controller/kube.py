"""All Kubernetes API I/O of the controller, in one place.

A small async client on httpx that reuses the credentials kopf resolved at login (so the
operator authenticates once, the same way, with kubeconfig or the in-cluster service
account), plus the verbs the controller needs: server-side apply, get, merge-patch of
status (with a resourceVersion precondition), API discovery (cached with a TTL, because
CRDs such as LeaderWorkerSet can be installed while the operator runs), and for the
autoscaler the scale subresource, a labelled list and a merge patch (pod annotations).
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import httpx
import kopf

from tokenfleet.api.spec import KIND, PLURAL

FIELD_MANAGER = "tokenfleet"
APPLY_CONTENT_TYPE = "application/apply-patch+yaml"  # JSON is valid YAML; kubectl sends JSON too
MERGE_CONTENT_TYPE = "application/merge-patch+json"

# kind -> plural. Static because the operator only ever writes these kinds; discovery is
# used for "does this API exist", not for naming.
PLURALS: dict[str, str] = {
    "Deployment": "deployments",
    "Service": "services",
    "PodMonitor": "podmonitors",
    "PodDisruptionBudget": "poddisruptionbudgets",
    "PersistentVolumeClaim": "persistentvolumeclaims",
    "LeaderWorkerSet": "leaderworkersets",
    "ConfigMap": "configmaps",
    "ServiceAccount": "serviceaccounts",
    "Role": "roles",
    "RoleBinding": "rolebindings",
    "InferencePool": "inferencepools",
    "HTTPRoute": "httproutes",
    KIND: PLURAL,
    "Pod": "pods",
}

# Connections to the apiserver, and requests in flight on them.
MAX_CONNECTIONS = 20
# login(renew) -> credentials; renew=True after a 401 (e.g. a rotated service-account token).
Login = Callable[[bool], Awaitable[kopf.ConnectionInfo]]


class ApiError(Exception):
    """A Kubernetes API failure, with the status code that decides retry vs. Degraded."""

    def __init__(self, status: int, reason: str, message: str, what: str) -> None:
        super().__init__(f"{what}: HTTP {status} {reason}: {message}")
        self.status = status
        self.reason = reason
        self.message = message

    @property
    def transient(self) -> bool:
        # 409: a concurrent writer (retry reads the new state); 429: throttled; 5xx: the
        # apiserver or a webhook is unwell. Other 4xx (400/403/422) will fail again as is.
        return self.status in (409, 429) or self.status >= 500


def plural_of(kind: str) -> str:
    return PLURALS.get(kind) or kind.lower() + "s"


def object_path(
    api_version: str,
    plural: str,
    namespace: str | None,
    name: str | None = None,
    subresource: str | None = None,
) -> str:
    base = f"/api/{api_version}" if "/" not in api_version else f"/apis/{api_version}"
    parts = [base]
    if namespace:
        parts.append(f"namespaces/{namespace}")
    parts.append(plural)
    if name:
        parts.append(name)
    if subresource:
        parts.append(subresource)
    return "/".join(parts)


def manifest_path(manifest: Mapping[str, Any]) -> str:
    meta = manifest["metadata"]
    return object_path(
        manifest["apiVersion"], plural_of(manifest["kind"]), meta.get("namespace"), meta["name"]
    )


class KubeClient:
    """One pooled HTTP connection set to the apiserver, shared by every reconcile."""

    def __init__(self, login: Login, *, timeout: float = 30.0, discovery_ttl: float = 60.0):
        self._login = login
        self._timeout = timeout
        self._client: httpx.AsyncClient | None = None
        self._lock = asyncio.Lock()
        self._discovery_ttl = discovery_ttl
        self._discovery: dict[str, tuple[float, frozenset[str]]] = {}
        self._in_flight: dict[httpx.AsyncClient, int] = {}
        self._retired: set[httpx.AsyncClient] = set()
        # At most one request per pooled connection at a time: httpcore's pool rescans its
        # whole queue of waiting requests on every release, so 1,000 reconciles queued there
        # cost quadratic CPU (a third of the operator's time in the 1,000-LLMService bench).
        self._slots = asyncio.Semaphore(MAX_CONNECTIONS)

    async def _close_idle(self) -> None:
        for client in [c for c in self._retired if not self._in_flight.get(c)]:
            self._retired.discard(client)
            self._in_flight.pop(client, None)
            await client.aclose()

    async def _connect(
        self, *, renew: bool = False, stale: httpx.AsyncClient | None = None
    ) -> httpx.AsyncClient:
        async with self._lock:
            if self._client is not None and not (renew and self._client is stale):
                return self._client  # (another request already logged in again)
            if self._client is not None:
                # Requests still in flight on the old client finish on it; it is closed
                # once the last one is done (closing it now would fail all of them).
                self._retired.add(self._client)
                await self._close_idle()
            info = await self._login(renew)
            verify: Any = False if info.insecure else info.as_ssl_context()
            self._client = httpx.AsyncClient(
                base_url=info.server,
                verify=verify,
                headers=info.as_http_headers(),
                timeout=self._timeout,
                trust_env=info.trust_env,
                limits=httpx.Limits(
                    max_connections=MAX_CONNECTIONS, max_keepalive_connections=MAX_CONNECTIONS
                ),
            )
            return self._client

    async def close(self) -> None:
        for client in [*self._retired, *([self._client] if self._client else [])]:
            await client.aclose()
        self._retired.clear()
        self._in_flight.clear()
        self._client = None

    async def request(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, str] | None = None,
        body: Any = None,
        content_type: str = "application/json",
        what: str = "",
    ) -> dict[str, Any]:
        content = None if body is None else json.dumps(body).encode()
        headers = {"Content-Type": content_type} if content is not None else {}
        response: httpx.Response | None = None
        client: httpx.AsyncClient | None = None
        for attempt in range(2):
            # A 401 usually means a rotated service-account token: log in again once.
            client = await self._connect(renew=attempt > 0, stale=client)
            self._in_flight[client] = self._in_flight.get(client, 0) + 1
            try:
                async with self._slots:
                    response = await client.request(
                        method, path, params=params, content=content, headers=headers
                    )
            except httpx.TransportError as error:
                raise ApiError(503, type(error).__name__, str(error), what or path) from error
            finally:
                self._in_flight[client] -= 1
                if client in self._retired:
                    await self._close_idle()
            if response.status_code != 401:
                break
        assert response is not None
        if response.status_code >= 400:
            raise _api_error(response, what or f"{method} {path}")
        return dict(response.json()) if response.content else {}

    async def apply(self, manifest: Mapping[str, Any], *, dry_run: bool = False) -> dict[str, Any]:
        """Server-side apply: create or update to exactly these fields, owned by tokenfleet.

        dry_run: the apiserver validates (schema, admission webhooks) and stores nothing.
        """
        meta = manifest["metadata"]
        params = {"fieldManager": FIELD_MANAGER, "force": "true"}
        if dry_run:
            params["dryRun"] = "All"
        return await self.request(
            "PATCH",
            manifest_path(manifest),
            params=params,
            body=manifest,
            content_type=APPLY_CONTENT_TYPE,
            what=f"{'dry-run ' if dry_run else ''}apply {manifest['kind']} "
            f"{meta.get('namespace')}/{meta['name']}",
        )

    async def list(
        self, api_version: str, kind: str, namespace: str, label_selector: str
    ) -> list[dict[str, Any]]:
        """Objects of a kind in a namespace matching a label selector (empty if not served)."""
        try:
            listing = await self.request(
                "GET",
                object_path(api_version, plural_of(kind), namespace),
                params={"labelSelector": label_selector},
                what=f"list {kind} in {namespace}",
            )
        except ApiError as error:
            if error.status == 404:
                return []
            raise
        items = [dict(item) for item in listing.get("items") or []]
        for item in items:  # list items carry no kind / apiVersion of their own
            item.setdefault("kind", kind)
            item.setdefault("apiVersion", api_version)
        return items

    async def delete(
        self, api_version: str, kind: str, namespace: str, name: str, uid: str
    ) -> None:
        """Delete this exact object (a uid precondition: never a namesake created since)."""
        try:
            await self.request(
                "DELETE",
                object_path(api_version, plural_of(kind), namespace, name),
                body={"preconditions": {"uid": uid}, "propagationPolicy": "Background"},
                what=f"delete {kind} {namespace}/{name}",
            )
        except ApiError as error:
            if error.status not in (404, 409):  # gone already, or a namesake: leave it
                raise

    async def get(
        self, api_version: str, kind: str, namespace: str | None, name: str
    ) -> dict[str, Any] | None:
        """The object, or None when it does not exist."""
        try:
            return await self.request(
                "GET",
                object_path(api_version, plural_of(kind), namespace, name),
                what=f"get {kind} {namespace}/{name}",
            )
        except ApiError as error:
            if error.status == 404:
                return None
            raise

    async def patch_status(
        self,
        api_version: str,
        kind: str,
        namespace: str,
        name: str,
        status: Mapping[str, Any],
        *,
        resource_version: str | None = None,
    ) -> dict[str, Any]:
        """Merge-patch status; with `resource_version`, only if the object still has it
        (else HTTP 409): the precondition that lets two writers share one status."""
        return await self._merge_subresource(
            api_version,
            kind,
            namespace,
            name,
            "status",
            {"status": status},
            resource_version,
            what=f"update status of {kind} {namespace}/{name}",
        )

    async def scale(
        self,
        api_version: str,
        kind: str,
        namespace: str,
        name: str,
        replicas: int,
        *,
        resource_version: str | None = None,
    ) -> dict[str, Any]:
        """Set replicas through the scale subresource, as `kubectl scale` and the HPA do
        (so they all write the same field); with `resource_version`, only if unchanged."""
        return await self._merge_subresource(
            api_version,
            kind,
            namespace,
            name,
            "scale",
            {"spec": {"replicas": replicas}},
            resource_version,
            what=f"scale {kind} {namespace}/{name} to {replicas}",
        )

    async def _merge_subresource(
        self,
        api_version: str,
        kind: str,
        namespace: str,
        name: str,
        subresource: str,
        body: dict[str, Any],
        resource_version: str | None,
        *,
        what: str,
    ) -> dict[str, Any]:
        """Merge-patch a subresource; a `resource_version` makes it conditional (HTTP 409
        when the object has moved on)."""
        if resource_version is not None:
            body = {**body, "metadata": {"resourceVersion": resource_version}}
        return await self.request(
            "PATCH",
            object_path(api_version, plural_of(kind), namespace, name, subresource),
            body=body,
            content_type=MERGE_CONTENT_TYPE,
            what=what,
        )

    async def patch(
        self, api_version: str, kind: str, namespace: str, name: str, patch: Mapping[str, Any]
    ) -> dict[str, Any]:
        """A JSON merge patch of one object (metadata the operator sets on others' objects,
        e.g. pod-deletion-cost annotations on the ReplicaSet's pods)."""
        return await self.request(
            "PATCH",
            object_path(api_version, plural_of(kind), namespace, name),
            body=patch,
            content_type=MERGE_CONTENT_TYPE,
            what=f"patch {kind} {namespace}/{name}",
        )

    async def served_resources(self, group_version: str) -> frozenset[str]:
        """Plural names served under `group/version` (empty if the API is not installed)."""
        now = time.monotonic()
        cached = self._discovery.get(group_version)
        if cached is not None and now - cached[0] < self._discovery_ttl:
            return cached[1]
        try:
            listing = await self.request(
                "GET", f"/apis/{group_version}", what=f"discover {group_version}"
            )
            names = frozenset(
                str(item.get("name", "")) for item in listing.get("resources", []) or []
            )
        except ApiError as error:
            if error.status != 404:
                raise
            names = frozenset()
        self._discovery[group_version] = (now, names)
        return names

    async def has_resource(self, group_version: str, plural: str) -> bool:
        return plural in await self.served_resources(group_version)


def _api_error(response: httpx.Response, what: str) -> ApiError:
    reason, message = response.reason_phrase, response.text[:500]
    try:
        payload = response.json()
        if isinstance(payload, dict):
            reason = str(payload.get("reason") or reason)
            message = str(payload.get("message") or message)
    except ValueError:
        pass
    return ApiError(response.status_code, reason, message, what)
