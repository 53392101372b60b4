"""Pure helpers of the kubelet: what a pod of an engine Deployment runs on the simulator,
and the scrape targets Prometheus gets for it.

The pod's own engine command line (rendered by the operator) is translated flag by flag
into `tokenfleet sim`, so the simulated replica is sized exactly as the planned one:
vLLM's --tensor-parallel-size / --max-model-len / --max-num-seqs / --max-num-batched-tokens
and SGLang's --tp-size / --context-length / --max-running-requests / --chunked-prefill-size.
GPU type and engine version come from the plan annotation the operator writes.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from tokenfleet.engines import engine as engine_record

LLMSERVICE_LABEL = "tokenfleet.dev/llmservice"
PLAN_ANNOTATION = "tokenfleet.dev/plan"

# engine flag -> `tokenfleet sim` flag (the sim takes vLLM's names)
FLAGS: dict[str, dict[str, str]] = {
    "vllm": {
        "--tensor-parallel-size": "--tp",
        "--max-model-len": "--max-model-len",
        "--max-num-seqs": "--max-num-seqs",
        "--max-num-batched-tokens": "--max-num-batched-tokens",
        "--served-model-name": "--served-model-name",
    },
    "sglang": {
        "--model-path": "--model",
        "--tp-size": "--tp",
        "--context-length": "--max-model-len",
        "--max-running-requests": "--max-num-seqs",
        "--chunked-prefill-size": "--max-num-batched-tokens",
        "--served-model-name": "--served-model-name",
    },
}


# Boolean engine flags the simulator takes as they are.
SWITCHES = ("--enable-lora",)


def lora_sim_args(engine: str, argv: list[str]) -> list[str]:
    """The engine's LoRA flags in the simulator's words: vLLM's --max-loras /
    --max-lora-rank / --lora-modules as they are; SGLang's --max-loras-per-batch counts the
    base model's slot (one less adapter), and its --lora-paths entries are NAME=PATH or
    JSON with lora_name / lora_path."""
    out: list[str] = [a for a in argv if a in SWITCHES]
    modules: list[str] = []
    for i, arg in enumerate(argv[:-1]):
        value = argv[i + 1]
        if arg in ("--max-loras", "--max-lora-rank"):
            out += [arg, value]
        elif arg == "--max-loras-per-batch":
            out += ["--max-loras", str(max(1, int(value) - 1))]
        elif arg in ("--lora-modules", "--lora-paths"):
            for item in argv[i + 1 :]:
                if item.startswith("--"):
                    break
                if item.startswith("{"):
                    doc = json.loads(item)
                    name = doc.get("lora_name") or doc.get("name")
                    item = f"{name}={doc.get('lora_path') or doc.get('path')}"
                modules.append(item)
    if modules:
        out += ["--lora-modules", *modules]
    return out


class PodSpecError(ValueError):
    """The Deployment cannot be run on the simulator; the message names the field."""


@dataclass(frozen=True)
class EngineDeployment:
    """One engine Deployment as the kubelet needs it."""

    namespace: str
    name: str
    llmservice: str
    replicas: int
    generation: int
    sim_args: tuple[str, ...]
    uid: str = ""
    pod_labels: tuple[tuple[str, str], ...] = ()
    pod_annotations: tuple[tuple[str, str], ...] = ()
    env: tuple[tuple[str, str], ...] = ()  # the engine container's literal env
    readiness_gates: tuple[str, ...] = ()  # condition types the pod waits for


def _container(deployment: dict[str, Any]) -> dict[str, Any]:
    containers = deployment["spec"]["template"]["spec"].get("containers") or []
    for container in containers:
        if container.get("name") == "engine":
            return dict(container)
    if not containers:
        raise PodSpecError("spec.template.spec.containers: empty")
    return dict(containers[0])


def sim_args(deployment: dict[str, Any], time_scale: float = 1.0) -> list[str]:
    """`tokenfleet sim` arguments (no --host / --port) for a pod of this Deployment."""
    name = deployment["metadata"]["name"]
    raw = (deployment["metadata"].get("annotations") or {}).get(PLAN_ANNOTATION)
    if not raw:
        raise PodSpecError(f"Deployment {name}: no {PLAN_ANNOTATION} annotation to size the sim")
    plan = json.loads(raw)
    engine, _, version = str(plan["engine"]).partition(" ")
    if engine not in FLAGS:
        raise PodSpecError(f"Deployment {name}: engine {engine!r} is not simulated")
    container = _container(deployment)
    argv = [*container.get("command", []), *container.get("args", [])]
    out = ["--engine", engine, "--gpu", str(plan["gpu"])]
    if version:
        out += ["--engine-version", version]
    if engine_record(engine).model_positional:
        # `vllm serve MODEL ...`: the model is the first positional after "serve".
        if "serve" not in argv or argv.index("serve") + 1 >= len(argv):
            raise PodSpecError(f"Deployment {name}: no `vllm serve MODEL` in {argv[:4]}")
        out += ["--model", argv[argv.index("serve") + 1]]
    table = FLAGS[engine]
    for i, arg in enumerate(argv[:-1]):
        if arg in table:
            out += [table[arg], argv[i + 1]]
    if "--model" not in out:
        raise PodSpecError(f"Deployment {name}: no model in the engine command {argv[:4]}")
    out += lora_sim_args(engine, argv)
    out += ["--time-scale", f"{time_scale:g}"]
    return out


def literal_env(deployment: dict[str, Any]) -> tuple[tuple[str, str], ...]:
    """The engine container's env entries with a literal value (what a process can get)."""
    env = _container(deployment).get("env") or []
    return tuple(
        (str(e["name"]), str(e["value"]))
        for e in env
        if isinstance(e, dict) and "name" in e and isinstance(e.get("value"), str)
    )


def engine_deployment(deployment: dict[str, Any], time_scale: float) -> EngineDeployment | None:
    """The Deployment as an engine to simulate, or None when it is not a tokenfleet engine."""
    meta = deployment["metadata"]
    template = deployment["spec"]["template"].get("metadata") or {}
    llmservice = (meta.get("labels") or {}).get(LLMSERVICE_LABEL)
    # Engine pods carry the LLMService's label; the endpoint picker's (spec.routing) do not.
    if not llmservice or LLMSERVICE_LABEL not in (template.get("labels") or {}):
        return None
    return EngineDeployment(
        namespace=meta["namespace"],
        name=meta["name"],
        llmservice=llmservice,
        replicas=int(deployment["spec"].get("replicas", 1)),
        generation=int(meta.get("generation", 1)),
        sim_args=tuple(sim_args(deployment, time_scale)),
        uid=str(meta.get("uid", "")),
        pod_labels=tuple(sorted((template.get("labels") or {}).items())),
        pod_annotations=tuple(sorted((template.get("annotations") or {}).items())),
        env=literal_env(deployment),
        readiness_gates=tuple(
            str(g.get("conditionType"))
            for g in deployment["spec"]["template"]["spec"].get("readinessGates") or []
            if isinstance(g, dict) and g.get("conditionType")
        ),
    )


def pod_manifest(engine: EngineDeployment, name: str, port: int) -> dict[str, Any]:
    """The Pod object the ReplicaSet would create (labels and annotations of the template,
    owned by the Deployment so deleting it collects the pod), running and not yet ready."""
    owner = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "name": engine.name,
        "uid": engine.uid,
        "controller": True,
    }
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": engine.namespace,
            "labels": dict(engine.pod_labels),
            "annotations": dict(engine.pod_annotations),
            "ownerReferences": [owner] if engine.uid else [],
        },
        "spec": {
            "nodeName": "local",
            # The sim's port stands in for the engine's: whoever calls the engine (the
            # operator's adapter loop) finds it as in a real pod, by the port's name.
            "containers": [
                {
                    "name": "engine",
                    "image": "tokenfleet-sim",
                    "ports": [{"name": "http", "containerPort": port, "protocol": "TCP"}],
                }
            ],
            **(
                {"readinessGates": [{"conditionType": g} for g in engine.readiness_gates]}
                if engine.readiness_gates
                else {}
            ),
        },
        "status": pod_status(port, ready=False),
    }


def pod_status(
    port: int, ready: bool, serving: bool | None = None, others: list[dict[str, Any]] | None = None
) -> dict[str, Any]:
    """The kubelet's part of a pod's status: the engine container ready (`serving`, its
    /health answers) and the pod Ready (serving, and every readiness gate condition True);
    `others`: conditions someone else set (a readiness gate), kept as they are."""
    serving = ready if serving is None else serving
    own = [
        {"type": "ContainersReady", "status": "True" if serving else "False"},
        {"type": "Ready", "status": "True" if ready else "False"},
    ]
    return {
        "phase": "Running",
        "podIP": "127.0.0.1",
        "conditions": [*(others or []), *own],
        "containerStatuses": [{"name": "engine", "ready": serving, "started": True}],
    }


def gates_pass(pod: dict[str, Any] | None, gates: tuple[str, ...]) -> bool:
    """Every readiness gate of the pod has its condition True (kubelet's rule)."""
    conditions = {
        c.get("type"): c.get("status")
        for c in ((pod or {}).get("status") or {}).get("conditions") or []
    }
    return all(conditions.get(g) == "True" for g in gates)


def foreign_conditions(pod: dict[str, Any] | None) -> list[dict[str, Any]]:
    """The pod's conditions the kubelet does not own (readiness gates)."""
    own = {"Ready", "ContainersReady"}
    return [
        dict(c)
        for c in ((pod or {}).get("status") or {}).get("conditions") or []
        if c.get("type") not in own
    ]


def deletion_cost(pod: dict[str, Any] | None) -> int:
    """controller.kubernetes.io/pod-deletion-cost (the ReplicaSet removes lower first)."""
    annotations = ((pod or {}).get("metadata") or {}).get("annotations") or {}
    try:
        return int(annotations.get("controller.kubernetes.io/pod-deletion-cost", 0))
    except (TypeError, ValueError):
        return 0


def target_group(address: str, llmservice: str, namespace: str, pod: str) -> dict[str, Any]:
    """One file_sd group: the labels the PodMonitor relabeling (llmservice) and the
    Prometheus Operator (namespace, pod) put on every engine series."""
    return {
        "targets": [address],
        "labels": {"llmservice": llmservice, "namespace": namespace, "pod": pod},
    }


def deployment_status(replicas: int, ready: int, updated: int, generation: int) -> dict[str, Any]:
    """Deployment status as the Deployment controller writes it."""
    return {
        "observedGeneration": generation,
        "replicas": replicas,
        "updatedReplicas": updated,
        "readyReplicas": ready,
        "availableReplicas": ready,
        "unavailableReplicas": max(0, replicas - ready),
    }
