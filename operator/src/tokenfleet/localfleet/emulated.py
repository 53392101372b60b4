"""The emulated Kubernetes API (kmock) on a loopback port, and a kubeconfig for it.

kmock (a Kubernetes API emulator by kopf's author) plus tokenfleet.testing.kmock_cluster
(resourceVersions, server-side apply, status writes, garbage collection) is the project's
only emulated component. It ships in the package, so `tokenfleet demo` runs from an
installed wheel with the `demo` extra, not only from a clone.
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from types import ModuleType
from typing import Any

import yaml

DEPLOYMENTS = "apps/v1/deployments"
PODS = "v1/pods"


def kmock_cluster() -> ModuleType:
    """tokenfleet.testing.kmock_cluster, or a one-line error naming the missing extra."""
    try:
        import kmock  # noqa: F401
    except ImportError as error:
        raise RuntimeError(
            "the emulated Kubernetes API needs the `kmock` package: "
            "pip install 'tokenfleet[demo]' (from a clone: make venv)"
        ) from error
    from tokenfleet.testing import kmock_cluster as module

    return module


def kubeconfig_for(server: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "kmock", "cluster": {"server": server}}],
        "users": [{"name": "local", "user": {"token": "local-fleet"}}],
        "contexts": [{"name": "kmock", "context": {"cluster": "kmock", "user": "local"}}],
        "current-context": "kmock",
    }


class EmulatedApi:
    """An emulated apiserver on 127.0.0.1 with the PodMonitor CRD installed, as a cluster
    running the Prometheus Operator has. Use as an async context manager."""

    def __init__(self, workdir: Path, namespaces: tuple[str, ...] = ("default",)) -> None:
        self.workdir = workdir
        self.namespaces = namespaces
        self.kubeconfig = workdir / "kubeconfig"
        self._stack = contextlib.AsyncExitStack()
        self.cluster: Any = None
        self.url = ""

    async def __aenter__(self) -> EmulatedApi:
        from kmock import Server

        module = kmock_cluster()
        self.cluster = await self._stack.enter_async_context(module.Cluster())
        server = await self._stack.enter_async_context(Server(self.cluster))
        self.url = str(server.url).rstrip("/")
        self.cluster.install(module.PODMONITORS)
        for ns in self.namespaces:
            self.cluster.objects["v1/namespaces", None, ns] = {"metadata": {"name": ns}}
        self.kubeconfig.write_text(yaml.safe_dump(kubeconfig_for(self.url)))
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self._stack.aclose()

    # --- reads and writes, through the API so watchers see events ------------------------

    async def create(self, body: dict[str, Any]) -> dict[str, Any]:
        """POST one object (an LLMService), as `kubectl create` would."""
        api_version, kind = body["apiVersion"], body["kind"]
        ns = body["metadata"].setdefault("namespace", "default")
        prefix = f"/apis/{api_version}" if "/" in api_version else f"/api/{api_version}"
        path = f"{prefix}/namespaces/{ns}/{kind.lower()}s"
        response = await self.cluster.post(path, json=body)
        if response.status >= 300:
            raise RuntimeError(f"creating {kind} {body['metadata']['name']}: {response.status}")
        return dict(await response.json())

    async def patch_status(
        self, key: str, namespace: str, name: str, status: dict[str, Any]
    ) -> None:
        group_version, plural = key.rsplit("/", 1)
        prefix = f"/apis/{group_version}" if "/" in group_version else f"/api/{group_version}"
        path = f"{prefix}/namespaces/{namespace}/{plural}/{name}/status"
        response = await self.cluster.patch(
            path,
            json={"status": status},
            headers={"Content-Type": "application/merge-patch+json"},
        )
        if response.status >= 300 and response.status != 404:  # 404: deleted meanwhile
            raise RuntimeError(f"status of {plural}/{name}: HTTP {response.status}")

    async def delete(self, key: str, namespace: str, name: str) -> None:
        group_version, plural = key.rsplit("/", 1)
        prefix = f"/apis/{group_version}" if "/" in group_version else f"/api/{group_version}"
        response = await self.cluster.delete(f"{prefix}/namespaces/{namespace}/{plural}/{name}")
        if response.status >= 300 and response.status != 404:
            raise RuntimeError(f"deleting {plural}/{name}: HTTP {response.status}")

    def get(self, key: str, namespace: str, name: str) -> dict[str, Any] | None:
        result: dict[str, Any] | None = self.cluster.get(key, namespace, name)
        return result

    def items(self, key: str) -> list[dict[str, Any]]:
        return list(self.cluster.items(key))
