"""Dynamic LoRA loading: the one place the operator calls an engine's API.

One loop per LLMService whose adapters load dynamically (spec.lora.loading: dynamic, the
default), on the active operator replica only (paused with the autoscalers,
controller/leadership.py). Every pass:
1. lists the engine pods that serve HTTP and asks each serving one for /v1/models (the
   adapters it holds);
2. loads what is missing and unloads what the spec dropped, through the engine's own
   endpoints (engines/lora.py), each call bounded by a deadline and a size cap, with a
   backoff per pod and adapter after a failure (controller/adapter_plan.py);
3. sets the pod's readiness gate once a new pod holds every adapter (a JSON patch of its
   status conditions, guarded by its resourceVersion);
4. writes status.adapters: per adapter, loaded on n of m serving pods, or why not.
A pass runs every PASS_SECONDS and at once after any change of the LLMService. What the
operator sends is an adapter's name and the path the pod loads it from; credentials stay
in Secrets the pod references (render/adapters.py), never in a request, log or status.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

import httpx

from tokenfleet.api import LLMService, parse_llmservice
from tokenfleet.api.spec import API_VERSION, KIND
from tokenfleet.controller import adapter_plan as ap
from tokenfleet.controller.kube import ApiError, KubeClient, object_path
from tokenfleet.controller.statuswrite import write_status
from tokenfleet.controller.tasks import cancel_all
from tokenfleet.engines.lora import ENDPOINTS, loaded_adapters
from tokenfleet.render.adapters import dynamic, engine_path
from tokenfleet.render.meta import CACHE_MOUNT, ENGINE_CONTAINER, HTTP_ROLES, PORT_NAME, ROLE_LABEL

INSTANCE_LABEL = "tokenfleet.dev/llmservice"
STATUS_KEY = "adapters"
PASS_SECONDS = 10.0
# A load downloads the adapter when the engine fetches it from the Hub: minutes at worst.
LOAD_DEADLINE_S = 300.0
LIST_DEADLINE_S = 10.0
CONNECT_S = 5.0
MAX_BODY_BYTES = 1024**2  # an engine's answer is a few KB; anything larger is cut
MAX_PODS_AT_ONCE = 8
JSON_PATCH = "application/json-patch+json"

Clock = Callable[[], float]


class EngineError(Exception):
    """An engine call that did not succeed; the message is one line for status."""


async def _call(
    client: httpx.AsyncClient,
    method: str,
    url: str,
    body: Mapping[str, Any] | None,
    deadline: float,
) -> tuple[int, Any]:
    """(status, JSON or text) of one request, within `deadline` seconds and MAX_BODY_BYTES."""

    async def run() -> tuple[int, Any]:
        async with client.stream(method, url, json=body) as response:
            chunks, size = [], 0
            async for chunk in response.aiter_bytes():
                chunks.append(chunk)
                size += len(chunk)
                if size > MAX_BODY_BYTES:
                    break
            raw = b"".join(chunks)[:MAX_BODY_BYTES]
            text = raw.decode("utf-8", "replace")
            try:
                return response.status_code, json.loads(text)
            except ValueError:
                return response.status_code, text

    try:
        return await asyncio.wait_for(run(), deadline)
    except TimeoutError:
        raise EngineError(f"{method} {url}: no answer within {deadline:.0f}s") from None
    except httpx.HTTPError as error:
        raise EngineError(f"{method} {url}: {type(error).__name__}: {error}") from None


def _error_text(body: Any) -> str:
    if isinstance(body, dict):
        inner = body.get("error")
        if isinstance(inner, dict) and inner.get("message"):
            return str(inner["message"])
        for key in ("error_message", "message", "detail"):
            if body.get(key):
                return str(body[key])
    return str(body)


def _already(status: int, body: Any) -> bool:
    """A load the engine refused because the adapter is there already (vLLM 400 "has
    already been loaded", SGLang "because it is already loaded"): the goal is met."""
    return status == 400 and "already" in _error_text(body) and "loaded" in _error_text(body)


class AdapterLoaders:
    """One dynamic-loading loop per LLMService that needs one."""

    def __init__(
        self,
        kube: KubeClient,
        *,
        time_scale: float = 1.0,
        pass_seconds: float = PASS_SECONDS,
        clock: Clock | None = None,
        client: httpx.AsyncClient | None = None,
    ) -> None:
        self.kube = kube
        self.time_scale = time_scale
        self.pass_seconds = pass_seconds
        # Backoffs run on the operator's clock (simulated seconds in a time-scaled fleet).
        self._clock = clock if clock is not None else (lambda: time.monotonic() * time_scale)
        self._client = client
        self._tasks: dict[tuple[str, str], asyncio.Task[None]] = {}
        self._wake: dict[tuple[str, str], asyncio.Event] = {}
        self._attempts: dict[tuple[str, str], ap.Attempts] = {}
        self._wanted: set[tuple[str, str]] = set()
        self._generations: dict[tuple[str, str], object] = {}
        self.active = True
        self._logger = logging.getLogger("tokenfleet.adapters")

    # --- which LLMServices run a loop --------------------------------------------------

    def sync(self, event_type: str | None, body: Mapping[str, Any]) -> None:
        meta = body.get("metadata") or {}
        key = (str(meta.get("namespace") or ""), str(meta.get("name") or ""))
        spec = body.get("spec") or {}
        wants = bool(spec.get("adapters")) or spec.get("lora") is not None
        if event_type == "DELETED" or meta.get("deletionTimestamp"):
            self._drop(key)
            return
        if not wants and key not in self._tasks:
            return  # nothing to do, nothing to clean up
        self._wanted.add(key)
        if not self.active:
            return
        task = self._tasks.get(key)
        generation = meta.get("generation")
        if task is not None and not task.done():
            # A new spec is worth a pass now; a status write (ours too) is not.
            if self._generations.get(key) != generation:
                self._generations[key] = generation
                self._wake[key].set()
            return
        self._generations[key] = generation
        self._wake[key] = asyncio.Event()
        self._tasks[key] = asyncio.create_task(self._loop(key), name=f"adapters {key[0]}/{key[1]}")

    def running(self) -> set[tuple[str, str]]:
        return {key for key, task in self._tasks.items() if not task.done()}

    async def pause(self) -> None:
        self.active = False
        await cancel_all(self._tasks)

    def resume(self) -> None:
        self.active = True
        for namespace, name in sorted(self._wanted):
            self.sync("MODIFIED", {"metadata": {"namespace": namespace, "name": name},
                                   "spec": {"lora": {}}})  # fmt: skip

    async def stop(self) -> None:
        await self.pause()
        if self._client is not None:
            await self._client.aclose()
            self._client = None

    def _drop(self, key: tuple[str, str]) -> None:
        task = self._tasks.pop(key, None)
        if task is not None and task is not asyncio.current_task():
            task.cancel()
        self._wake.pop(key, None)
        self._attempts.pop(key, None)
        self._wanted.discard(key)
        self._generations.pop(key, None)

    def _http(self) -> httpx.AsyncClient:
        if self._client is None:
            timeout = httpx.Timeout(LOAD_DEADLINE_S, connect=CONNECT_S)
            self._client = httpx.AsyncClient(timeout=timeout, trust_env=False)
        return self._client

    async def _loop(self, key: tuple[str, str]) -> None:
        me = asyncio.current_task()
        try:
            while self._tasks.get(key) is me:
                keep = True
                try:
                    keep = await self.tick(*key)
                except asyncio.CancelledError:
                    raise
                except ApiError as error:
                    self._logger.warning("%s/%s: adapters pass: %s", *key, error)
                except Exception:  # a bug: log it, keep the loop alive
                    self._logger.exception("%s/%s: adapters pass failed", *key)
                if not keep:
                    self._tasks.pop(key, None)
                    self._wanted.discard(key)
                    return
                wake = self._wake.get(key)
                if wake is None:
                    return
                wake.clear()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(wake.wait(), self.pass_seconds / self.time_scale)
        finally:
            if self._tasks.get(key) is me:
                self._tasks.pop(key, None)

    # --- one pass ------------------------------------------------------------------------

    async def tick(self, namespace: str, name: str) -> bool:
        """One pass; False when the LLMService needs no loop any more."""
        body = await self.kube.get(API_VERSION, KIND, namespace, name)
        if body is None or (body.get("metadata") or {}).get("deletionTimestamp"):
            return False
        try:
            service = parse_llmservice(body)
        except Exception:
            return True  # the reconciler reports the spec; look again after a change
        if not dynamic(service):
            await self._write_status(namespace, name, None)
            return False
        attempts = self._attempts.setdefault((namespace, name), ap.Attempts())
        wanted = [
            ap.Wanted(a.name, engine_path(a, CACHE_MOUNT), a.pinned) for a in service.spec.adapters
        ]
        listed = await self.kube.list("v1", "Pod", namespace, f"{INSTANCE_LABEL}={name}")
        pods = [
            p
            for p in listed
            if (p.get("metadata") or {}).get("labels", {}).get(ROLE_LABEL) in HTTP_ROLES
        ]
        semaphore = asyncio.Semaphore(MAX_PODS_AT_ONCE)

        async def one(pod: Mapping[str, Any]) -> ap.PodView:
            async with semaphore:
                return await self._pod_pass(service, pod, wanted, attempts)

        views = await asyncio.gather(*(one(p) for p in pods))
        attempts.keep((v.uid for v in views), (w.name for w in wanted))
        entries = ap.adapter_status(wanted, views, attempts)
        await self._write_status(namespace, name, entries)
        return True

    async def _pod_pass(
        self,
        service: LLMService,
        pod: Mapping[str, Any],
        wanted: list[ap.Wanted],
        attempts: ap.Attempts,
    ) -> ap.PodView:
        view = ap.pod_view(pod, ENGINE_CONTAINER, PORT_NAME)
        if not view.serving or view.url is None:
            return view
        engine = service.spec.engine.kind
        served = service.spec.model.effective_served_name
        try:
            status, listing = await _call(
                self._http(), "GET", f"{view.url}/v1/models", None, LIST_DEADLINE_S
            )
            if status != 200:
                raise EngineError(f"GET /v1/models: HTTP {status}")
        except EngineError as error:
            self._logger.info("%s: cannot list its adapters: %s", view.name, error)
            return view
        loaded = set(loaded_adapters(listing, served))
        view = replace(view, loaded=frozenset(loaded))
        endpoints = ENDPOINTS[engine]
        for action in ap.actions(wanted, view, attempts, self._clock()):
            adapter = action.adapter
            try:
                if action.kind == "load":
                    body = endpoints.load_body(adapter.name, adapter.path, adapter.pinned)
                    url = f"{view.url}{endpoints.load_path}"
                    code, answer = await _call(self._http(), "POST", url, body, LOAD_DEADLINE_S)
                    if code != 200 and not _already(code, answer):
                        raise EngineError(f"HTTP {code}: {_error_text(answer)}")
                    loaded.add(adapter.name)
                else:
                    body = endpoints.unload_body(adapter.name)
                    url = f"{view.url}{endpoints.unload_path}"
                    code, answer = await _call(self._http(), "POST", url, body, LIST_DEADLINE_S)
                    if code not in (200, 404):
                        raise EngineError(f"HTTP {code}: {_error_text(answer)}")
                    loaded.discard(adapter.name)
                attempts.succeeded(view.uid, adapter.name, action.kind)
                self._logger.info(
                    "%s adapter %s on pod %s", action.kind + "ed", adapter.name, view.name
                )
            except EngineError as error:
                failure = attempts.failed(
                    view.uid, adapter.name, action.kind, str(error), self._clock()
                )
                self._logger.warning(
                    "pod %s: %s of adapter %s failed (attempt %d): %s",
                    view.name, action.kind, adapter.name, failure.failures, failure.error,
                )  # fmt: skip
        view = replace(view, loaded=frozenset(loaded))
        gate = ap.gate_wanted(wanted, view)
        if gate is not None and gate != view.gate:
            await self._set_gate(pod, view, gate, len(wanted))
            view = replace(view, gate=gate)
        return view

    async def _set_gate(
        self, pod: Mapping[str, Any], view: ap.PodView, ready: bool, count: int
    ) -> None:
        meta, status = pod.get("metadata") or {}, pod.get("status") or {}
        conditions = ap.gate_conditions(
            status.get("conditions") or [],
            ready,
            ap.gate_message(view, count) if ready else "waiting for its adapters",
            time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        )
        version = meta.get("resourceVersion")
        verb = "replace" if "conditions" in status else "add"
        ops: list[dict[str, Any]] = [
            {"op": "test", "path": "/metadata/resourceVersion", "value": version},
            {"op": verb, "path": "/status/conditions", "value": conditions},
        ]
        path = object_path("v1", "pods", meta.get("namespace"), meta.get("name"), "status")
        try:
            await self.kube.request(
                "PATCH", path, body=ops, content_type=JSON_PATCH, what=f"gate pod {view.name}"
            )
        except ApiError as error:
            # Moved on meanwhile (409 / 422 on the test) or gone: the next pass sees it anew.
            self._logger.info("pod %s: gate not set this pass: %s", view.name, error)

    async def _write_status(
        self, namespace: str, name: str, entries: list[dict[str, Any]] | None
    ) -> None:
        def compose(obj: Mapping[str, Any]) -> dict[str, Any] | None:
            status = dict(obj.get("status") or {})
            if entries is None:
                if STATUS_KEY not in status:
                    return None
                status.pop(STATUS_KEY)
                return status
            status[STATUS_KEY] = entries
            return status

        await write_status(self.kube, namespace, name, compose)
