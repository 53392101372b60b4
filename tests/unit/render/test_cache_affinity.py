"""A ReadWriteOnce model cache with more than one replica: the engine pods share the node the
claim is attached to (required pod affinity on the hostname), instead of a second replica
waiting on a Multi-Attach error on another node. A ReadWriteMany cache needs nothing; a
ReadWriteOncePod cache with more than one replica, or a ReadWriteOnce one for a replica that
spans nodes, cannot be mounted and is refused naming the field and the fix."""

from __future__ import annotations

from typing import Any

import pytest

from tokenfleet.commands.render import render_documents
from tokenfleet.errors import UserError


def _body(storage: dict[str, Any] | None, **spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "apiVersion": "tokenfleet.dev/v1alpha1",
        "kind": "LLMService",
        "metadata": {"name": "llm", "namespace": "default"},
        "spec": {"model": {"id": "meta-llama/Llama-3.1-8B"}, "gpu": {"type": "l4", "count": 1}},
    }
    if storage is not None:
        body["spec"]["storage"] = storage
    body["spec"].update(spec)
    return body


def _pod_spec(body: dict[str, Any]) -> dict[str, Any]:
    (rendered,) = render_documents([body], "test")
    deployment = next(m for m in rendered.manifests if m["kind"] == "Deployment")
    spec: dict[str, Any] = deployment["spec"]["template"]["spec"]
    return spec


AUTOSCALED = {"autoscaling": {"enabled": True, "maxReplicas": 4}}
TERM = {
    "labelSelector": {"matchLabels": {"tokenfleet.dev/llmservice": "llm"}},
    "topologyKey": "kubernetes.io/hostname",
}


@pytest.mark.parametrize("spec", [AUTOSCALED, {"replicas": 2}])
def test_a_shared_read_write_once_cache_keeps_the_replicas_on_one_node(
    spec: dict[str, Any],
) -> None:
    pod = _pod_spec(_body({"size": "50Gi"}, **spec))
    required = pod["affinity"]["podAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert required == [TERM]


@pytest.mark.parametrize(
    ("storage", "spec"),
    [
        ({"size": "50Gi"}, {}),  # one replica: nothing to share
        ({"size": "50Gi", "accessMode": "ReadWriteMany"}, AUTOSCALED),
        (None, AUTOSCALED),  # an emptyDir per pod
    ],
)
def test_no_affinity_where_the_cache_is_not_shared_on_one_node(
    storage: dict[str, Any] | None, spec: dict[str, Any]
) -> None:
    assert "affinity" not in _pod_spec(_body(storage, **spec))


def test_the_users_affinity_keeps_its_terms_and_gains_ours() -> None:
    node = {"nodeSelectorTerms": [{"matchExpressions": [
        {"key": "zone", "operator": "In", "values": ["a"]}]}]}  # fmt: skip
    theirs = {"labelSelector": {"matchLabels": {"app": "cache-warmer"}}, "topologyKey": "zone"}
    affinity = {
        "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": node},
        "podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [theirs]},
    }
    body = _body({"size": "50Gi"}, **AUTOSCALED)
    body["spec"]["gpu"]["affinity"] = affinity
    got = _pod_spec(body)["affinity"]
    assert got["nodeAffinity"] == affinity["nodeAffinity"]
    assert got["podAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"] == [theirs, TERM]


def test_read_write_once_pod_with_more_than_one_replica_is_refused() -> None:
    with pytest.raises(UserError) as caught:
        _pod_spec(_body({"size": "50Gi", "accessMode": "ReadWriteOncePod"}, **AUTOSCALED))
    assert caught.value.field.endswith("spec.storage.accessMode") or "accessMode" in str(
        caught.value
    )
    assert "ReadWriteMany" in str(caught.value) and "4 replicas" in str(caught.value)
