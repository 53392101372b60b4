"""The chart installs in one release into the emulated Kubernetes API, in the order Helm
does, with its CRDs from crds/ (the default) or as templates (crds.templated, installed with
--skip-crds). Helm's install (helm/helm pkg/action/install.go): the crds/ files first, each
served once created; then the whole release manifest is mapped to served APIs before any
object of it is created (an unserved kind fails the release: "resource mapping not found
... ensure CRDs are installed first"), created in Helm's kind order (InstallOrder,
pkg/release/util/kind_sorter.go); then the post-install hooks, mapped only then.

The charts render by Helm's own Go SDK; the API is kmock's (tokenfleet.testing), whose
discovery serves a CRD's kind once the CRD is created, as the apiserver does."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support.chart_render import NAMESPACE, RELEASE, chart
from tokenfleet.localfleet.emulated import EmulatedApi

pytestmark = pytest.mark.system

# Helm's InstallOrder (kind_sorter.go); kinds not listed go last, in manifest order.
INSTALL_ORDER = [
    "PriorityClass", "Namespace", "NetworkPolicy", "ResourceQuota", "LimitRange",
    "PodSecurityPolicy", "PodDisruptionBudget", "ServiceAccount", "Secret", "SecretList",
    "ConfigMap", "StorageClass", "PersistentVolume", "PersistentVolumeClaim",
    "CustomResourceDefinition", "ClusterRole", "ClusterRoleList", "ClusterRoleBinding",
    "ClusterRoleBindingList", "Role", "RoleList", "RoleBinding", "RoleBindingList", "Service",
    "DaemonSet", "Pod", "ReplicationController", "ReplicaSet", "Deployment",
    "HorizontalPodAutoscaler", "StatefulSet", "Job", "CronJob", "IngressClass", "Ingress",
    "APIService", "MutatingWebhookConfiguration", "ValidatingWebhookConfiguration",
]  # fmt: skip
# What any apiserver serves besides what kmock declares: the kinds the chart also renders.
CORE = {
    ("apiextensions.k8s.io/v1", "CustomResourceDefinition"),
    ("rbac.authorization.k8s.io/v1", "ClusterRole"),
    ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding"),
}


class MappingError(Exception):
    pass


def _group_version(res: Any) -> str:
    return f"{res.group}/{res.version}" if res.group else res.version


def _served(api: EmulatedApi) -> set[tuple[str, str]]:
    return CORE | {(_group_version(res), info.kind) for res, info in api.cluster.resources.items()}


def _crd_served(api: EmulatedApi, crd: dict[str, Any]) -> None:
    """What the apiserver does once a CRD is created: discovery serves its kind."""
    spec = crd["spec"]
    for version in spec["versions"]:
        if version.get("served", True):
            key = f"{spec['group']}/{version['name']}/{spec['names']['plural']}"
            api.cluster.declare(
                key, spec["names"]["kind"], "status" in version.get("subresources", {})
            )


async def _create(api: EmulatedApi, obj: dict[str, Any], created: list[str]) -> None:
    if obj["kind"] == "CustomResourceDefinition":
        _crd_served(api, obj)
    elif (obj["apiVersion"], obj["kind"]) not in CORE:
        group_version = obj["apiVersion"]
        res, info = next(
            (res, info)
            for res, info in api.cluster.resources.items()
            if _group_version(res) == group_version and info.kind == obj["kind"]
        )
        plural = res.plural
        prefix = f"/apis/{group_version}" if "/" in group_version else f"/api/{group_version}"
        ns = obj["metadata"].get("namespace") or (NAMESPACE if info.namespaced else None)
        path = f"{prefix}/namespaces/{ns}/{plural}" if ns else f"{prefix}/{plural}"
        response = await api.cluster.post(path, json=obj)
        assert response.status < 300, (path, response.status, await response.text())
    created.append(obj["kind"])


def _map(api: EmulatedApi, objects: list[dict[str, Any]]) -> None:
    served = _served(api)
    for obj in objects:
        if (obj["apiVersion"], obj["kind"]) not in served:
            raise MappingError(
                f'resource mapping not found for name: "{obj["metadata"]["name"]}" from "": '
                f'no matches for kind "{obj["kind"]}" in version "{obj["apiVersion"]}"; '
                "ensure CRDs are installed first"
            )


def _order(obj: dict[str, Any]) -> int:
    kind = obj["kind"]
    return INSTALL_ORDER.index(kind) if kind in INSTALL_ORDER else len(INSTALL_ORDER)


async def helm_install(api: EmulatedApi, values: dict[str, Any], skip_crds: bool) -> list[str]:
    """Install as `helm install` does; the kinds created, in order."""
    created: list[str] = []
    if not skip_crds:
        for crd in sorted(chart().crds, key=lambda f: f["name"]):
            await _create(api, yaml.safe_load(crd["data"]), created)
    rendered = chart().render(values, name=RELEASE, namespace=NAMESPACE, is_install=True)
    docs = [
        d
        for path, text in sorted(rendered.items())
        if not path.endswith("NOTES.txt")
        for d in yaml.safe_load_all(text)
        if d
    ]
    hooks = [d for d in docs if "helm.sh/hook" in (d["metadata"].get("annotations") or {})]
    manifest = [d for d in docs if d not in hooks]
    _map(api, manifest)  # the whole release, before any of it is created
    for obj in sorted(manifest, key=_order):  # a stable sort keeps the manifest's order
        await _create(api, obj, created)
    post = [d for d in hooks if "post-install" in d["metadata"]["annotations"]["helm.sh/hook"]]
    _map(api, post)
    for obj in post:
        await _create(api, obj, created)
    return created


@pytest.mark.parametrize(
    ("values", "skip_crds"),
    [
        ({}, False),
        ({"crds": {"templated": True}}, True),
        ({"crds": {"templated": True}, "watchNamespaces": ["team-a"]}, True),
    ],
    ids=["crds-folder", "templated", "templated-namespaced"],
)
async def test_the_chart_installs_in_one_release(
    values: dict[str, Any], skip_crds: bool, tmp_path: Path
) -> None:
    async with EmulatedApi(tmp_path, namespaces=("default", NAMESPACE, "team-a")) as api:
        created = await helm_install(api, values, skip_crds)
    peering = "KopfPeering" if values.get("watchNamespaces") else "ClusterKopfPeering"
    assert peering in created and "Deployment" in created
    crd_at = [i for i, kind in enumerate(created) if kind == "CustomResourceDefinition"]
    assert len(crd_at) == 3 and max(crd_at) < created.index(peering)


async def test_a_peering_object_beside_its_templated_crd_would_fail(tmp_path: Path) -> None:
    """The check is Helm's: the peering object as a plain template of the release that also
    templates its CRD cannot be mapped on a fresh cluster."""
    async with EmulatedApi(tmp_path, namespaces=("default", NAMESPACE)) as api:
        rendered = chart().render(
            {"crds": {"templated": True}}, name=RELEASE, namespace=NAMESPACE, is_install=True
        )
        docs = [
            d
            for path, text in rendered.items()
            if not path.endswith("NOTES.txt")
            for d in yaml.safe_load_all(text)
            if d
        ]
        for d in docs:
            (d.get("metadata") or {}).pop("annotations", None)
        with pytest.raises(MappingError, match="ensure CRDs are installed first"):
            _map(api, docs)
