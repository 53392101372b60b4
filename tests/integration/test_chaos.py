"""Issue 8's chaos test: 30+ hostile LLMServices applied together with 5 good ones, against
the real `tokenfleet operator` process.

The good ones all reach their Deployment; every hostile one ends Degraded with a message
naming the field at fault; nothing foreign is touched; no hostile one has any object; the
operator logs no traceback and its peak RSS stays under 300 MB.
"""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml
from kmock import Server

from tests.support.cluster_objects import DEPLOYMENTS, LLMS_PATH, SERVICES, example, owned
from tests.support.operator_harness import NAMESPACE, kubeconfig_for
from tests.support.operator_process import OperatorProcess, peak_rss_mib
from tokenfleet.testing.kmock_cluster import LLMSERVICES, Cluster

RSS_LIMIT_MIB = 300 * 1000**2 / 1024**2  # "300 MB" of the issue, in MiB
Mutation = Callable[[dict[str, Any]], None]


def spec_set(path: str, value: Any) -> Mutation:
    """Set spec.<dotted path> (creating sections) to value."""

    def mutate(body: dict[str, Any]) -> None:
        node = body["spec"]
        *parents, leaf = path.split(".")
        for key in parents:
            node = node.setdefault(key, {})
        node[leaf] = value

    return mutate


def inline(**config: Any) -> Mutation:
    base = example("finetune-inline-config.yaml")["spec"]["model"]

    def mutate(body: dict[str, Any]) -> None:
        model = copy.deepcopy(base)
        model["config"].update(config)
        body["spec"]["model"] = model

    return mutate


def rename(name: str) -> Mutation:
    def mutate(body: dict[str, Any]) -> None:
        body["metadata"]["name"] = name

    return mutate


# (name, mutation of the 8B example, text the Degraded message must contain: the field)
HOSTILE: list[tuple[str, Mutation, str]] = [
    ("deep", inline(num_hidden_layers=100_000_000), "num_hidden_layers"),
    ("deeper", inline(num_hidden_layers=10**12), "num_hidden_layers"),
    ("wide", inline(hidden_size=10**9), "hidden_size"),
    ("vocab", inline(vocab_size=10**12), "vocab_size"),
    ("neg-heads", inline(num_attention_heads=-4), "num_attention_heads"),
    ("head-dim-x", inline(head_dim="x"), "head_dim"),
    ("kv-heads", inline(num_key_value_heads=10**6), "num_key_value_heads"),
    ("context", inline(max_position_embeddings=10**15), "max_position_embeddings"),
    ("experts", inline(num_local_experts=10**7, num_experts_per_tok=2), "num_local_experts"),
    ("no-ffn", inline(intermediate_size=0), "intermediate_size"),
    ("quant-str", inline(quantization_config="fp8"), "quantization_config"),
    ("zero-cache", spec_set("storage.size", "0"), "spec.storage.size"),
    ("label-key", spec_set("podTemplate.labels", {"a/b/c": "x"}), "spec.podTemplate.labels"),
    ("label-val", spec_set("podTemplate.labels", {"team": "a b"}), "spec.podTemplate.labels"),
    ("anno-key", spec_set("podTemplate.annotations", {"-x": "1"}), "spec.podTemplate.annotations"),
    ("anno-size", spec_set("podTemplate.annotations", {"x": "y" * 300_000}), "annotations"),
    ("cpu", spec_set("resources.requests.cpu", "lots"), "spec.resources.requests.cpu"),
    ("memory", spec_set("resources.limits.memory", -1), "spec.resources.limits.memory"),
    ("affinity", spec_set("gpu.affinity", {"nodeAfinity": {}}), "spec.gpu.affinity"),
    ("node-sel", spec_set("gpu.nodeSelector", {"bad key": "x"}), "spec.gpu.nodeSelector"),
    (
        "dup-env",
        spec_set("engine.env", [{"name": "A", "value": "1"}, {"name": "A", "value": "2"}]),
        "spec.engine.env",
    ),
    ("env-both", spec_set("engine.env", [{"name": "A", "value": "1", "valueFrom": {}}]), "env"),
    ("port", spec_set("engine.args", ["--port", "1"]), "spec.engine.args"),
    ("tp", spec_set("engine.args", ["--tensor-parallel-size=8"]), "spec.engine.args"),
    ("len", spec_set("engine.args", ["--max_model_len=1"]), "spec.engine.args"),
    ("model-flag", spec_set("engine.args", ["--model", "evil/model"]), "spec.engine.args"),
    ("untagged", spec_set("engine.image", "evil/miner"), "spec.engine.image"),
    ("replicas", spec_set("replicas", 10**9), "spec.replicas"),
    ("gpu-type", spec_set("gpu.type", "h9000"), "spec.gpu.type"),
    ("max-len", spec_set("workload.maxModelLen", 10**9), "spec.workload.maxModelLen"),
    ("rollout", spec_set("rollout", {"maxSurge": 0, "maxUnavailable": 0}), "spec.rollout"),
    ("no-cm", spec_set("model", {"id": "x/y", "configMapRef": {"name": "nope"}}), "configMapRef"),
    ("dotted.name", lambda body: None, "metadata.name"),
    ("x" * 70, lambda body: None, "metadata.name"),
    ("kubernetes", lambda body: None, "metadata.name"),  # a foreign Service has the name
]
GOOD = [f"good-{i}" for i in range(5)]


def body_for(name: str, mutate: Mutation) -> dict[str, Any]:
    body = example("llama-3.1-8b-l4.yaml")
    body["metadata"]["name"] = name
    mutate(body)
    return body


FOREIGN = [
    # A Service the hostile "kubernetes" LLMService is named after.
    (
        "/api/v1/namespaces/{ns}/services",
        SERVICES,
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": "kubernetes", "labels": {"component": "apiserver"}},
            "spec": {"ports": [{"port": 443, "targetPort": 6443}]},
        },
    ),
    # A Deployment that carries a hostile one's label but no ownerReference.
    (
        "/apis/apps/v1/namespaces/{ns}/deployments",
        DEPLOYMENTS,
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "bystander", "labels": {"tokenfleet.dev/llmservice": "port"}},
            "spec": {"replicas": 3},
        },
    ),
]


def degraded_message(cluster: Cluster, name: str) -> str | None:
    obj = cluster.get(LLMSERVICES, NAMESPACE, name) or {}
    for cond in (obj.get("status") or {}).get("conditions") or []:
        if cond["type"] == "Degraded" and cond["status"] == "True":
            return str(cond["reason"]) + ": " + str(cond["message"])
    return None


async def test_hostile_llmservices_harm_nothing_and_stall_nobody(tmp_path: Path) -> None:
    assert len(HOSTILE) >= 30
    async with Cluster() as cluster, Server(cluster) as server:
        cluster.objects["v1/namespaces", None, NAMESPACE] = {"metadata": {"name": NAMESPACE}}
        kubeconfig = tmp_path / "kubeconfig"
        kubeconfig.write_text(yaml.safe_dump(kubeconfig_for(str(server.url).rstrip("/"))))
        foreign_before = {}
        for path, key, obj in FOREIGN:
            response = await cluster.post(path.format(ns=NAMESPACE), json=obj)
            assert response.status < 300
            foreign_before[key, obj["metadata"]["name"]] = cluster.get(
                key, NAMESPACE, obj["metadata"]["name"]
            )

        operator = OperatorProcess(kubeconfig, tmp_path / "operator.log")
        operator.start()
        try:
            await operator.watching(cluster)
            bodies = [body_for(name, mutate) for name, mutate, _ in HOSTILE]
            bodies += [body_for(name, lambda body: None) for name in GOOD]
            responses = await asyncio.gather(*(cluster.post(LLMS_PATH, json=b) for b in bodies))
            assert all(r.status < 300 for r in responses)

            await operator.wait(
                lambda: all(cluster.get(DEPLOYMENTS, NAMESPACE, n) for n in GOOD),
                "every good Deployment",
                timeout=60,
            )
            await operator.wait(
                lambda: all(degraded_message(cluster, n) for n, _, _ in HOSTILE),
                "every hostile one Degraded",
                timeout=60,
            )
            peak = peak_rss_mib(operator.pid)
        finally:
            operator.stop()

        for name, _, field in HOSTILE:
            message = degraded_message(cluster, name)
            assert message and field in message, (name, message)
        for (key, name), before in foreign_before.items():
            assert cluster.get(key, NAMESPACE, name) == before, f"{key} {name} was touched"
        hostile = {name for name, _, _ in HOSTILE}
        leftovers = [
            o["metadata"]["name"]
            for o in owned(cluster)
            if o["metadata"]["labels"].get("tokenfleet.dev/llmservice") in hostile
        ]
        assert leftovers == []  # nothing half-created
        assert {
            o["metadata"]["labels"]["tokenfleet.dev/llmservice"] for o in owned(cluster)
        } == set(GOOD)
        log = operator.text()
        assert "Traceback" not in log, log[log.index("Traceback") - 500 :][:4000]
        assert peak < RSS_LIMIT_MIB, f"peak RSS {peak:.0f} MiB"
        print(
            f"\nchaos: {len(HOSTILE)} hostile + {len(GOOD)} good, operator peak RSS {peak:.0f} MiB"
        )
