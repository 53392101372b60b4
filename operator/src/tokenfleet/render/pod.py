"""The engine pod template, shared by Deployments (role "server") and LeaderWorkerSets
(roles "leader" and "worker")."""

from __future__ import annotations

import json
import posixpath
from typing import Any, Literal

from tokenfleet.api import LLMService
from tokenfleet.capacity.placement import node_selection
from tokenfleet.capacity.types import Plan
from tokenfleet.engines import (
    PROGRAMS,
    Launch,
    NodeRole,
    ServingRole,
    engine,
    engine_command,
    engine_info,
    worker_serves_health,
)
from tokenfleet.engines.images import DEFAULT_IMAGES, ImageTable, engine_image, gpu_vendor
from tokenfleet.render import adapters as lora
from tokenfleet.render import cache_affinity, timing
from tokenfleet.render.meta import (
    ANYWHERE,
    CACHE_MOUNT,
    ENGINE_CONTAINER,
    GPU_TYPE_LABEL,
    PORT_NAME,
    ROLE_LABEL,
    Place,
    labels,
)
from tokenfleet.render.simulate import simulated

Role = Literal["server", "leader", "worker"]

WEIGHTS_MOUNT = "/mnt/model-weights"  # spec.model.source.pvc, read-only
SHM_MOUNT = "/dev/shm"
# Pod Security "restricted" for the container: the engines need no privilege and no
# capability (GPUs come through the device plugin, not through capabilities).
CONTAINER_SECURITY: dict[str, Any] = {
    "allowPrivilegeEscalation": False,
    "capabilities": {"drop": ["ALL"]},
}
# The kubelet expands these in command/args from the env LeaderWorkerSet injects.
LWS_LEADER_ADDRESS = "$(LWS_LEADER_ADDRESS)"
LWS_WORKER_INDEX = "$(LWS_WORKER_INDEX)"


def no_expansion(text: str) -> str:
    """`text` as the kubelet will pass it, literally: it expands `$(NAME)` in command and
    args from the container's env, so `--api-key $(HF_TOKEN)` would splice the Hub token
    into a flag (or a served model name anyone can list). `$$(` is its escape for `$(`.
    Applied to everything the user supplies; the operator's own `$(LWS_...)` stay live."""
    return text.replace("$(", "$$(")


def cache_claim_name(service: LLMService) -> str:
    return f"{service.name}-model-cache"


def gpus_per_pod(plan: Plan) -> int:
    return plan.gpus_per_replica // max(plan.nodes_per_replica, 1)


def model_ref_and_args(service: LLMService) -> tuple[str, list[str]]:
    """What the engine is told to load, and flags the source needs."""
    model = service.spec.model
    source = model.effective_source
    if source.pvc is not None:
        path = posixpath.normpath(posixpath.join(WEIGHTS_MOUNT, source.pvc.path.lstrip("/")))
        return path, []
    if source.uri is not None:
        return source.uri, []
    hf = source.hugging_face
    repo = (hf.repo if hf else None) or model.id
    revision = hf.revision if hf else None
    return repo, (["--revision", revision] if revision else [])


def _split_command(engine: str, command: list[str]) -> tuple[list[str], list[str]]:
    """command / args the way people read them: the program, then its arguments."""
    if command[:2] == ["/bin/sh", "-c"]:  # vLLM multi-node on Ray
        return command[:2], command[2:]
    n = len(PROGRAMS[engine])
    return command[:n], command[n:]


def pod_security_context(service: LLMService) -> dict[str, Any]:
    """Pod Security "restricted" settings the engines work with, plus the user's identity
    (spec.podTemplate.securityContext: runAsNonRoot, runAsUser, runAsGroup, fsGroup)."""
    context: dict[str, Any] = {"seccompProfile": {"type": "RuntimeDefault"}}
    user = service.spec.pod_template.security_context
    if user is not None:
        context.update(user.to_dict())
    return context


def runs_as_non_root(service: LLMService) -> bool:
    user = service.spec.pod_template.security_context
    return user is not None and bool(user.run_as_non_root or user.run_as_user)


def _env(service: LLMService, plan: Plan) -> list[dict[str, Any]]:
    env: list[dict[str, Any]] = [{"name": "HF_HOME", "value": f"{CACHE_MOUNT}/huggingface"}]
    if runs_as_non_root(service):
        # The images' HOME is /root, unwritable for another user; torch, triton and
        # flashinfer cache kernels under ~/.cache. Point HOME at the writable cache volume.
        env.append({"name": "HOME", "value": f"{CACHE_MOUNT}/home"})
    cache_root = engine(plan.engine).cache_root_env
    if cache_root is not None:
        env.append({"name": cache_root, "value": f"{CACHE_MOUNT}/{plan.engine}"})
    hf = service.spec.model.effective_source.hugging_face
    if hf is not None and hf.token_secret_ref is not None:
        ref = hf.token_secret_ref
        env.append(
            {
                "name": "HF_TOKEN",
                "valueFrom": {"secretKeyRef": {"name": ref.name, "key": ref.key}},
            }
        )
    env += lora.engine_env(service, plan)
    # The user's entries replace ours by name: env is a map keyed by name under
    # server-side apply, so a duplicate name would be rejected.
    user = [e.to_dict() for e in service.spec.engine.env]
    names = {e["name"] for e in user}
    return [e for e in env if e["name"] not in names] + user


def _resources(service: LLMService, plan: Plan, place: Place) -> dict[str, Any]:
    """GPUs from the plan; CPU and memory from spec.resources, else a modest default that
    leaves room on common GPU nodes (2 CPUs and 4 GiB + 6 GiB per GPU, requests only)."""
    gpus = gpus_per_pod(plan)
    chosen = node_selection(plan.gpu, place.placement).resource_name
    gpu_resource = service.spec.gpu.resource_name or chosen
    requests: dict[str, Any] = {"cpu": str(max(2, 2 * gpus)), "memory": f"{4 + 6 * gpus}Gi"}
    limits: dict[str, Any] = {}
    if service.spec.resources is not None:
        # Quantities as strings, the form the API server returns (no diff on re-apply).
        requests.update({k: str(v) for k, v in service.spec.resources.requests.to_dict().items()})
        limits.update({k: str(v) for k, v in service.spec.resources.limits.to_dict().items()})
    requests[gpu_resource] = str(gpus)
    limits[gpu_resource] = str(gpus)  # extended resources: limit must equal request
    return {"requests": requests, "limits": limits}


def _probes(plan: Plan) -> dict[str, Any]:
    info = engine_info(plan.engine)

    def get() -> dict[str, Any]:  # a fresh dict per probe: shared objects become YAML anchors
        return {"path": info.health_path, "port": PORT_NAME}

    return {
        # Model download + load: sized by timing.startup_seconds; liveness and readiness
        # only start once this has passed.
        "startupProbe": {
            "httpGet": get(),
            "periodSeconds": timing.PROBE_PERIOD_SECONDS,
            "timeoutSeconds": 5,
            "failureThreshold": timing.startup_failure_threshold(plan),
        },
        "readinessProbe": {
            "httpGet": get(),
            "periodSeconds": 5,
            "timeoutSeconds": 5,
            "failureThreshold": 3,
        },
        # Lenient: a busy engine answers /health late; restarting it costs minutes of GPU.
        "livenessProbe": {
            "httpGet": get(),
            "periodSeconds": 30,
            "timeoutSeconds": 10,
            "failureThreshold": 5,
        },
    }


def node_role(plan: Plan, role: Role) -> NodeRole | None:
    if role == "server":
        return None
    rank: int | str = 0 if role == "leader" else LWS_WORKER_INDEX
    return NodeRole(plan.nodes_per_replica, rank, LWS_LEADER_ADDRESS)


def container_image(service: LLMService, plan: Plan, images: ImageTable = DEFAULT_IMAGES) -> str:
    """spec.engine.image, else the default image of the engine version for the GPU's vendor
    (a ROCm build on AMD GPUs): engines.images."""
    engine = service.spec.engine
    if engine.image:
        return engine.image
    vendor = gpu_vendor(plan.gpu.resource_name)
    return engine_image(plan.engine, engine.version or plan.engine_version, vendor, images)


def engine_container(
    service: LLMService,
    plan: Plan,
    role: Role,
    images: ImageTable = DEFAULT_IMAGES,
    serving: ServingRole | None = None,
    place: Place = ANYWHERE,
) -> dict[str, Any]:
    spec = service.spec
    info = engine_info(plan.engine)
    model_ref, source_args = model_ref_and_args(service)
    # spec.engine.speculative is rendered from the plan (engines/speculative.py): the
    # planner may have left it off where it lowers goodput.
    user_args = [*source_args, *spec.engine.args]
    launch = Launch(
        no_expansion(model_ref),
        served_name=no_expansion(spec.model.effective_served_name),
        extra_args=tuple(no_expansion(a) for a in user_args),
        prefix_caching=spec.engine.prefix_caching,
        node=node_role(plan, role),
        adapters=lora.static_adapters(service, CACHE_MOUNT),
        serving=serving,
    )
    command = engine_command(plan, launch)
    program, args = _split_command(plan.engine, command)
    mounts: list[dict[str, Any]] = [
        {"name": "shm", "mountPath": SHM_MOUNT},
        {"name": "model-cache", "mountPath": CACHE_MOUNT},
    ]
    if spec.model.effective_source.pvc is not None:
        mounts.append({"name": "model-weights", "mountPath": WEIGHTS_MOUNT, "readOnly": True})
    mounts += lora.mounts(service)
    container: dict[str, Any] = {
        "name": ENGINE_CONTAINER,
        "image": container_image(service, plan, images),
        "imagePullPolicy": "IfNotPresent",
        "command": program,
        "args": args,
    }
    serves_http = role != "worker" or worker_serves_health(plan)
    if serves_http:
        port = serving.port if serving is not None else info.port
        container["ports"] = [{"name": PORT_NAME, "containerPort": port, "protocol": "TCP"}]
    container["env"] = _env(service, plan)
    container["resources"] = _resources(service, plan, place)
    container["volumeMounts"] = mounts
    container["securityContext"] = json.loads(json.dumps(CONTAINER_SECURITY))  # no YAML anchors
    if serves_http:
        container.update(_probes(plan))
    if spec.engine.simulate:
        container = simulated(container, service, plan)
    # Leaving the endpoints takes a moment to propagate; meanwhile running requests finish.
    # Workers wait as long, so their leader never loses its GPUs mid-drain.
    container["lifecycle"] = {
        "preStop": {"exec": {"command": ["sleep", str(timing.drain_seconds(service))]}}
    }
    return container


def _volumes(service: LLMService, plan: Plan) -> list[dict[str, Any]]:
    # NCCL and the engines' worker processes exchange tensors through shared memory; the
    # container runtime's 64 MiB /dev/shm is far too small for tensor parallelism.
    shm_gib = 2 if gpus_per_pod(plan) <= 1 else 16
    volumes: list[dict[str, Any]] = [
        {"name": "shm", "emptyDir": {"medium": "Memory", "sizeLimit": f"{shm_gib}Gi"}}
    ]
    if service.spec.storage is not None:
        claim = {"claimName": cache_claim_name(service)}
        volumes.append({"name": "model-cache", "persistentVolumeClaim": claim})
    else:
        volumes.append({"name": "model-cache", "emptyDir": {}})
    pvc = service.spec.model.effective_source.pvc
    if pvc is not None:
        volumes.append(
            {
                "name": "model-weights",
                "persistentVolumeClaim": {"claimName": pvc.claim_name, "readOnly": True},
            }
        )
    return volumes + lora.volumes(service)


def _affinity(
    user: dict[str, Any] | None, expressions: list[dict[str, Any]]
) -> dict[str, Any] | None:
    """spec.gpu.affinity with the GPU labels that take several values (capacity/placement.py)
    required too: ANDed into each of the user's node selector terms (terms are ORed), or as
    the one term when the user has none."""
    if not expressions:
        return user
    out = json.loads(json.dumps(user or {}))  # a deep copy of plain JSON data
    required = out.setdefault("nodeAffinity", {}).setdefault(
        "requiredDuringSchedulingIgnoredDuringExecution", {}
    )
    terms = required.get("nodeSelectorTerms") or [{}]
    for term in terms:
        term["matchExpressions"] = [*term.get("matchExpressions", []), *expressions]
    required["nodeSelectorTerms"] = terms
    return dict(out)


def pod_template(
    service: LLMService,
    plan: Plan,
    role: Role,
    images: ImageTable = DEFAULT_IMAGES,
    serving: ServingRole | None = None,
    place: Place = ANYWHERE,
) -> dict[str, Any]:
    """One engine pod; `serving`: the role of disaggregated serving it runs (render/roles.py
    adds what the role needs around the engine); `place`: the GPU node labels' provider and,
    for spec.gpu.type auto, the GPU type's label."""
    spec = service.spec
    info = engine_info(plan.engine)
    # The user's extra labels come after ours and cannot replace them (selectors use ours).
    pod_labels = {**labels(service), ROLE_LABEL: role}
    if place.typed:
        pod_labels[GPU_TYPE_LABEL] = plan.gpu.id
    pod_labels.update({k: v for k, v in spec.pod_template.labels.items() if k not in pod_labels})
    annotations = dict(spec.pod_template.annotations)
    if role != "worker":
        # For Prometheus setups without the Prometheus Operator (no PodMonitor).
        annotations.update(
            {
                "prometheus.io/scrape": "true",
                "prometheus.io/port": str(info.port),
                "prometheus.io/path": info.metrics_path,
            }
        )
    gpu = spec.gpu
    selection = node_selection(plan.gpu, place.placement)
    node_selector = {**selection.node_selector(), **gpu.node_selector}
    affinity = _affinity(gpu.affinity, selection.expressions())
    if spec.engine.simulate:  # any node will do: no GPU node label on a kind cluster
        node_selector = dict(gpu.node_selector)
        affinity = gpu.affinity
    pod: dict[str, Any] = {
        # Service links would put e.g. VLLM_PORT=tcp://... into the env of pods in a
        # namespace with a Service named "vllm", which vLLM reads as its own setting.
        "enableServiceLinks": False,
        "terminationGracePeriodSeconds": timing.termination_grace_seconds(service),
    }
    if node_selector:
        pod["nodeSelector"] = node_selector
    if gpu.tolerations:
        pod["tolerations"] = [t.to_dict() for t in gpu.tolerations]
    affinity = cache_affinity.merged(affinity, cache_affinity.pod_affinity(service, plan))
    if affinity:
        pod["affinity"] = affinity
    template = spec.pod_template
    if template.service_account_name:
        pod["serviceAccountName"] = template.service_account_name
    if template.priority_class_name:
        pod["priorityClassName"] = template.priority_class_name
    if template.image_pull_secrets:
        pod["imagePullSecrets"] = [s.to_dict() for s in template.image_pull_secrets]
    # The model server never talks to the Kubernetes API: no token in its filesystem.
    pod["automountServiceAccountToken"] = False
    pod["securityContext"] = pod_security_context(service)
    engine = engine_container(service, plan, role, images, serving, place)
    fetch = lora.init_containers(
        service,
        engine["image"],
        lora.fetch_security(pod["securityContext"], CONTAINER_SECURITY),
        CACHE_MOUNT,
        images,
    )
    if fetch:
        pod["initContainers"] = fetch
    pod["containers"] = [engine]
    gates = lora.readiness_gates(service)
    if gates and role != "worker":
        pod["readinessGates"] = gates
    pod["volumes"] = _volumes(service, plan)
    metadata: dict[str, Any] = {"labels": pod_labels}
    if annotations:
        metadata["annotations"] = annotations
    return {"metadata": metadata, "spec": pod}
