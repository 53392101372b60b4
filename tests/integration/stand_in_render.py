"""A stand-in for tokenfleet.render.all, used only while that package has not landed.

It produces the same kinds of manifests (Deployment or LeaderWorkerSet, Service, PDB,
PodMonitor when monitoring exists) with the engine arguments that matter to the tests.
conftest.default_pipeline() prefers the real render.all whenever it exists.
"""

from __future__ import annotations

from typing import Any


def render_all(
    service: Any, plan: Any, *, monitoring_available: bool, lws_available: bool
) -> list[dict[str, Any]]:
    name, ns = service.name, service.namespace
    labels = {
        "app.kubernetes.io/name": "tokenfleet-engine",
        "app.kubernetes.io/instance": name,
        "app.kubernetes.io/managed-by": "tokenfleet",
        "tokenfleet.dev/llmservice": name,
    }
    meta = {"name": name, "namespace": ns, "labels": labels}
    args = [
        "--tensor-parallel-size",
        str(plan.tensor_parallel_size),
        "--max-model-len",
        str(plan.max_model_len),
        "--gpu-memory-utilization",
        str(plan.memory_fraction),
    ]
    pod = {
        "metadata": {"labels": labels},
        "spec": {"containers": [{"name": "engine", "image": "vllm/vllm-openai", "args": args}]},
    }
    replicas = service.spec.replicas
    if plan.nodes_per_replica > 1:
        workload: dict[str, Any] = {
            "apiVersion": "leaderworkerset.x-k8s.io/v1",
            "kind": "LeaderWorkerSet",
            "metadata": meta,
            "spec": {
                "replicas": replicas,
                "leaderWorkerTemplate": {"size": plan.nodes_per_replica, "workerTemplate": pod},
            },
        }
    else:
        workload = {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": meta,
            "spec": {"replicas": replicas, "selector": {"matchLabels": labels}, "template": pod},
        }
    manifests = [
        workload,
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": meta,
            "spec": {"selector": labels, "ports": [{"name": "http", "port": 8000}]},
        },
        {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": meta,
            "spec": {"maxUnavailable": 1, "selector": {"matchLabels": labels}},
        },
    ]
    if monitoring_available:
        manifests.append(
            {
                "apiVersion": "monitoring.coreos.com/v1",
                "kind": "PodMonitor",
                "metadata": meta,
                "spec": {"selector": {"matchLabels": labels}},
            }
        )
    return manifests
