"""An engine pod of one role of disaggregated serving: what the role adds around the engine
the aggregated pod template runs (render/pod.py, given the role's ServingRole). Pure.

- labels: tokenfleet's role label (each role's workload selects its own pods) and llm-d's
  `llm-d.ai/role`, which the endpoint picker's prefill-filter / decode-filter read;
- vLLM: VLLM_NIXL_SIDE_CHANNEL_HOST is the pod IP (downward API), so the NIXL handshake
  listens where the other role can reach it (engines/disagg.py); its port (5600) is declared;
- SGLang prefill: its bootstrap port is declared;
- decode pods that serve HTTP: llm-d's routing sidecar takes the engine's usual port (the
  one the InferencePool targets, named `http`); the engine moves to its role port, named
  `engine`, which its probes follow; the pod runs under the sidecar's ServiceAccount, whose
  token only the sidecar mounts (render/routing/sidecar.py).
"""

from __future__ import annotations

from typing import Any

from tokenfleet.api import LLMService
from tokenfleet.capacity.types import Plan
from tokenfleet.engines import engine as engine_record
from tokenfleet.engines import engine_info
from tokenfleet.engines.disagg import NIXL_SIDE_CHANNEL_HOST, NIXL_SIDE_CHANNEL_PORT
from tokenfleet.engines.images import ImageTable
from tokenfleet.render.meta import (
    ENGINE_CONTAINER,
    LLMD_ROLE_LABEL,
    PORT_NAME,
    SERVING_ROLE_LABEL,
    RoleRender,
)
from tokenfleet.render.routing import sidecar

ENGINE_PORT_NAME = "engine"  # a decode pod's engine port, behind the sidecar's `http`
PROBES = ("startupProbe", "readinessProbe", "livenessProbe")


def decorate(
    template: dict[str, Any],
    service: LLMService,
    plan: Plan,
    node: str,
    role: RoleRender,
    images: ImageTable,
) -> dict[str, Any]:
    labels = template["metadata"]["labels"]
    labels[SERVING_ROLE_LABEL] = role.name
    labels[LLMD_ROLE_LABEL] = role.name
    pod = template["spec"]
    (engine,) = [c for c in pod["containers"] if c["name"] == ENGINE_CONTAINER]
    ports = engine.setdefault("ports", [])
    if engine_record(plan.engine).kv_side_channel:
        names = {e["name"] for e in engine["env"]}
        if NIXL_SIDE_CHANNEL_HOST not in names:  # the user's entry wins, as for every env
            engine["env"].insert(
                0,
                {
                    "name": NIXL_SIDE_CHANNEL_HOST,
                    "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}},
                },
            )
        ports.append({"name": "nixl", "containerPort": NIXL_SIDE_CHANNEL_PORT, "protocol": "TCP"})
    elif role.name == "prefill" and node != "worker":
        port = role.serving.bootstrap_port
        ports.append({"name": "bootstrap", "containerPort": port, "protocol": "TCP"})
    if role.name == "decode" and node != "worker":
        _behind_sidecar(template, engine, service, plan, role, images)
    return template


def _behind_sidecar(
    template: dict[str, Any],
    engine: dict[str, Any],
    service: LLMService,
    plan: Plan,
    role: RoleRender,
    images: ImageTable,
) -> None:
    pod = template["spec"]
    for port in engine["ports"]:
        if port["name"] == PORT_NAME:
            port["name"] = ENGINE_PORT_NAME
    for probe in PROBES:
        if probe in engine:
            engine[probe]["httpGet"]["port"] = ENGINE_PORT_NAME
    front = engine_info(plan.engine).port
    pod["initContainers"] = [
        *pod.get("initContainers", []),
        sidecar.container(service, plan.engine, front, role.serving.port, images),
    ]
    pod["serviceAccountName"] = sidecar.sidecar_name(service)
    pod["volumes"] = [*pod.get("volumes", []), sidecar.token_volume()]
    annotations = template["metadata"].get("annotations") or {}
    if "prometheus.io/port" in annotations:
        annotations["prometheus.io/port"] = str(role.serving.port)
