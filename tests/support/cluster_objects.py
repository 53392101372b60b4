"""The objects the integration tests create and read on the emulated cluster: example
LLMServices, the API paths and kinds the operator owns, and the small readers of status
and rendered arguments."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from tests.support.operator_harness import NAMESPACE, eventually
from tokenfleet.testing.kmock_cluster import LLMSERVICES, LWS, Cluster

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
LLMS_PATH = f"/apis/tokenfleet.dev/v1alpha1/namespaces/{NAMESPACE}/llmservices"
DEPLOYMENTS = "apps/v1/deployments"
SERVICES = "v1/services"
PDBS = "policy/v1/poddisruptionbudgets"
PVCS = "v1/persistentvolumeclaims"


def example(name: str, kind: str = "LLMService") -> dict[str, Any]:
    docs = yaml.safe_load_all((EXAMPLES / name).read_text())
    return next(d for d in docs if d and d.get("kind") == kind)


async def create(cluster: Cluster, body: dict[str, Any], path: str = LLMS_PATH) -> None:
    response = await cluster.post(path, json=body)
    assert response.status < 300, await response.text()


async def patch(cluster: Cluster, path: str, body: dict[str, Any]) -> None:
    headers = {"Content-Type": "application/merge-patch+json"}
    response = await cluster.patch(path, json=body, headers=headers)
    assert response.status < 300, await response.text()


def llms(cluster: Cluster, name: str) -> dict[str, Any]:
    return cluster.get(LLMSERVICES, NAMESPACE, name) or {}


def condition(cluster: Cluster, name: str, type_: str) -> dict[str, Any]:
    conditions = llms(cluster, name).get("status", {}).get("conditions", [])
    return next((c for c in conditions if c["type"] == type_), {})


async def condition_when(cluster: Cluster, name: str, type_: str, **fields: str) -> dict[str, Any]:
    """The LLMService's condition `type_`, once each of `fields` (status=, reason=) has its
    value."""

    def check() -> dict[str, Any] | None:
        c = condition(cluster, name, type_)
        return c if all(c.get(k) == v for k, v in fields.items()) else None

    what = " ".join([type_, *(f"{k}={v}" for k, v in fields.items())])
    found: dict[str, Any] = await eventually(check, what=what)
    return found


async def degraded_condition(cluster: Cluster, name: str) -> dict[str, Any]:
    """The LLMService's Degraded condition, once it is True."""
    return await condition_when(cluster, name, "Degraded", status="True")


def owned(cluster: Cluster) -> list[dict[str, Any]]:
    return [
        obj
        for key in (DEPLOYMENTS, SERVICES, PDBS, PVCS, LWS)
        for obj in cluster.items(key)
        if obj["metadata"].get("labels", {}).get("app.kubernetes.io/managed-by") == "tokenfleet"
    ]


def crd_status_schema() -> dict[str, Any]:
    crd = yaml.safe_load((EXAMPLES.parent / "crds" / "tokenfleet.dev_llmservices.yaml").read_text())
    version = next(v for v in crd["spec"]["versions"] if v["name"] == "v1alpha1")
    schema = version["schema"]["openAPIV3Schema"]["properties"]["status"]
    return {**schema, "additionalProperties": False}


def events(cluster: Cluster) -> list[dict[str, Any]]:
    return cluster.items("v1/events")


def engine_args(deployment: dict[str, Any]) -> list[str]:
    return deployment["spec"]["template"]["spec"]["containers"][0]["args"]


def arg(args: list[str], flag: str) -> str | None:
    return args[args.index(flag) + 1] if flag in args else None
