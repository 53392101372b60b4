"""The engine pod's part in serving LoRA adapters (spec.adapters, spec.lora). Pure.

Where each adapter's files come from, and what the engine is told to load:
- hf://org/repo: the engine downloads the Hub repo itself (vllm/lora/utils.py
  get_adapter_absolute_path; sglang/srt/lora/lora_config.py snapshot_download), with the
  HF_TOKEN of its environment; it is given `org/repo`;
- hf://org/repo@revision (static loading): the init step downloads that revision into the
  model cache with huggingface_hub (which both engine images carry), and the engine loads
  /model-cache/adapters/<name>;
- s3://bucket/prefix (static loading): the init step copies it there with the AWS CLI, the
  adapter's credentialsSecretRef as its environment;
- pvc://claim/path: the claim is mounted read-only at /mnt/adapters/<claim>.

Dynamic loading (the default) adds the readiness gate the operator sets once a pod holds
every adapter (controller/adapter_plan.py), and for vLLM the environment variable that
turns its load / unload endpoints on. Changing spec.adapters then changes nothing in the
pod template (only new pvc:// claims add a volume); static loading lists the adapters on
the command line, so a change rolls the pods.
"""

from __future__ import annotations

import posixpath
from typing import Any

from tokenfleet.api import LLMService
from tokenfleet.api.adapters import AdapterSpec, engine_hub_token
from tokenfleet.capacity.types import Plan
from tokenfleet.engines.images import DEFAULT_IMAGES, ImageTable, fetch_image
from tokenfleet.engines.lora import ENDPOINTS
from tokenfleet.engines.types import StaticAdapter

ADAPTERS_DIR = "adapters"  # under the model cache mount
CLAIMS_MOUNT = "/mnt/adapters"
GATE = "tokenfleet.dev/adapters-loaded"  # controller/adapter_plan.py sets it
FETCH_USER = 65534  # the init steps run as nobody unless the pod sets a user
# Downloads one Hub revision into a directory: python3 -c HF_FETCH REPO REVISION DIR.
HF_FETCH = (
    "import sys; from huggingface_hub import snapshot_download; "
    "snapshot_download(repo_id=sys.argv[1], revision=sys.argv[2], local_dir=sys.argv[3])"
)


def dynamic(service: LLMService) -> bool:
    lora = service.spec.lora
    return service.spec.lora_enabled and (lora is None or lora.loading == "dynamic")


def _fetched(adapter: AdapterSpec) -> bool:
    """Files the init step places (static loading): pinned revisions and object stores."""
    return adapter.scheme == "s3" or adapter.revision is not None


def claim_volume(claim: str) -> str:
    return f"adapters-{claim}"[:63].rstrip("-.")


def engine_path(adapter: AdapterSpec, cache_mount: str) -> str:
    """What the engine is given to load the adapter."""
    claim = adapter.claim
    if claim is not None:
        name, path = claim
        return posixpath.normpath(posixpath.join(CLAIMS_MOUNT, name, path))
    if _fetched(adapter):
        return posixpath.join(cache_mount, ADAPTERS_DIR, adapter.name)
    repo = adapter.hub_repo
    assert repo is not None
    return repo


def static_adapters(service: LLMService, cache_mount: str) -> tuple[StaticAdapter, ...]:
    if not service.spec.lora_enabled or dynamic(service):
        return ()
    return tuple(
        StaticAdapter(a.name, engine_path(a, cache_mount), a.pinned) for a in service.spec.adapters
    )


def engine_env(service: LLMService, plan: Plan) -> list[dict[str, Any]]:
    """Env of the engine container: the runtime endpoints' switch, and a Hub token named by
    the adapters when the model names none."""
    env: list[dict[str, Any]] = []
    if dynamic(service):
        env += [{"name": k, "value": v} for k, v in ENDPOINTS[plan.engine].env]
    hf = service.spec.model.effective_source.hugging_face
    model_token = hf.token_secret_ref if hf else None
    token = engine_hub_token(service.spec.adapters, model_token)
    if token is not None and model_token is None:
        env.append(
            {
                "name": "HF_TOKEN",
                "valueFrom": {"secretKeyRef": {"name": token.name, "key": token.key}},
            }
        )
    return env


def claims(service: LLMService) -> list[str]:
    return sorted({a.claim[0] for a in service.spec.adapters if a.claim is not None})


def mounts(service: LLMService) -> list[dict[str, Any]]:
    return [
        {"name": claim_volume(c), "mountPath": f"{CLAIMS_MOUNT}/{c}", "readOnly": True}
        for c in claims(service)
    ]


def volumes(service: LLMService) -> list[dict[str, Any]]:
    return [
        {"name": claim_volume(c), "persistentVolumeClaim": {"claimName": c, "readOnly": True}}
        for c in claims(service)
    ]


def readiness_gates(service: LLMService) -> list[dict[str, str]]:
    return [{"conditionType": GATE}] if dynamic(service) else []


def init_containers(
    service: LLMService,
    engine_image: str,
    security: dict[str, Any],
    cache_mount: str,
    images: ImageTable = DEFAULT_IMAGES,
) -> list[dict[str, Any]]:
    """One init container per adapter whose files the pod must fetch before the engine
    starts (static loading of hf://...@revision and s3:// sources)."""
    if dynamic(service):
        return []
    hf = service.spec.model.effective_source.hugging_face
    model_token = hf.token_secret_ref if hf else None
    out: list[dict[str, Any]] = []
    for a in service.spec.adapters:
        if not _fetched(a):
            continue
        target = posixpath.join(cache_mount, ADAPTERS_DIR, a.name)
        env: list[dict[str, Any]] = [{"name": "HOME", "value": "/tmp"}]
        container: dict[str, Any] = {"name": f"fetch-{a.name.lower()}"[:63].rstrip("-.")}
        if a.scheme == "s3":
            container["image"] = fetch_image("aws-cli", images)
            container["command"] = ["aws", "s3", "sync", a.source, target, "--only-show-errors"]
            if a.credentials_secret_ref is not None:
                container["envFrom"] = [{"secretRef": {"name": a.credentials_secret_ref.name}}]
        else:
            repo, revision = a.hub_repo, a.revision
            assert repo is not None and revision is not None
            container["image"] = engine_image
            container["command"] = ["python3", "-c", HF_FETCH, repo, revision, target]
            env.append({"name": "HF_HOME", "value": posixpath.join(cache_mount, "huggingface")})
            token = a.token_secret_ref or model_token
            if token is not None:
                ref = {"secretKeyRef": {"name": token.name, "key": token.key}}
                env.append({"name": "HF_TOKEN", "valueFrom": ref})
        container.update(
            {
                "imagePullPolicy": "IfNotPresent",
                "env": env,
                "volumeMounts": [{"name": "model-cache", "mountPath": cache_mount}],
                "resources": {"requests": {"cpu": "500m", "memory": "512Mi"}},
                "securityContext": security,
            }
        )
        out.append(container)
    return out


def fetch_security(
    pod_security: dict[str, Any], container_security: dict[str, Any]
) -> dict[str, Any]:
    """The init steps' security context: Pod Security "restricted", as nobody unless the
    pod already names a user (spec.podTemplate.securityContext)."""
    context = dict(container_security)
    if not pod_security.get("runAsUser"):
        context.update({"runAsNonRoot": True, "runAsUser": FETCH_USER, "runAsGroup": FETCH_USER})
    return context
