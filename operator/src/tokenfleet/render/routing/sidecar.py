"""llm-d's routing sidecar on decode pods: it runs a request's prefill on the prefill pod the
endpoint picker chose, then its decode on the pod's own engine. Pure.

Everything follows llm-d/llm-d-router v0.10.0 (engines.images.PICKER_VERSION), the release
of the picker whose disaggregation profile sets the header the sidecar reads:
- flags: pkg/sidecar/proxy/options.go (--port, --model-server-port, --kv-connector,
  --secure-proxy, --enable-ssrf-protection, --inference-pool, --pool-group); connector names
  pkg/sidecar/constants/constants.go (nixlv2 for vLLM's NixlConnector, sglang for SGLang's
  bootstrap protocol). The render tests check every rendered flag and value against both
  files, kept verbatim beside them;
- layout: deploy/components/vllm-decode/deployment.yaml runs it as a native sidecar (an init
  container with restartPolicy Always) on the port the pool targets, in front of the engine
  on another port (engines/disagg.py DECODE_PORT_OFFSET); plain HTTP (--secure-proxy=false),
  as the Gateway and the picker call the pool's pods;
- --enable-ssrf-protection with --inference-pool: the sidecar forwards a prefill only to a
  pod of its own pool (pkg/sidecar/proxy/allowlist.go watches the pool and its pods), so a
  client that sets the prefill header itself cannot make a decode pod call an arbitrary
  address. Those watches need get/list/watch on pods and inferencepools in the namespace:
  the rules of the picker's ClusterRole, bound to the sidecar's own ServiceAccount, whose
  token is mounted into the sidecar container only (the engine container gets none).
"""

from __future__ import annotations

from typing import Any

from tokenfleet.api import LLMService
from tokenfleet.engines.images import ImageTable, sidecar_image
from tokenfleet.errors import UserError
from tokenfleet.render.meta import PORT_NAME
from tokenfleet.render.routing.names import picker_labels
from tokenfleet.render.routing.rbac import RBAC_GROUP

SIDECAR_CONTAINER = "routing-sidecar"
SIDECAR_SUFFIX = "-pd-sidecar"
TOKEN_VOLUME = "sidecar-kube-api-access"
TOKEN_PATH = "/var/run/secrets/kubernetes.io/serviceaccount"  # client-go's in-cluster path
# pkg/sidecar/constants/constants.go: the P/D protocol between the two engines.
KV_CONNECTORS = {"vllm": "nixlv2", "sglang": "sglang"}
POOL_GROUP = "inference.networking.k8s.io"


def sidecar_name(service: LLMService) -> str:
    return f"{service.name}{SIDECAR_SUFFIX}"


def sidecar_args(service: LLMService, engine: str, port: int, engine_port: int) -> list[str]:
    return [
        f"--port={port}",
        f"--model-server-port={engine_port}",
        f"--kv-connector={KV_CONNECTORS[engine]}",
        "--secure-proxy=false",
        "--enable-ssrf-protection=true",
        f"--inference-pool={service.namespace}/{service.name}",
        f"--pool-group={POOL_GROUP}",
    ]


def container(
    service: LLMService, engine: str, port: int, engine_port: int, images: ImageTable
) -> dict[str, Any]:
    """The native sidecar (an init container that keeps running) of a decode pod."""
    return {
        "name": SIDECAR_CONTAINER,
        "image": sidecar_image(images),
        "imagePullPolicy": "IfNotPresent",
        "args": sidecar_args(service, engine, port, engine_port),
        "restartPolicy": "Always",
        "ports": [{"name": PORT_NAME, "containerPort": port, "protocol": "TCP"}],
        "readinessProbe": {
            "httpGet": {"path": "/health", "port": PORT_NAME},
            "periodSeconds": 5,
        },
        "resources": {"requests": {"cpu": "250m", "memory": "256Mi"}, "limits": {"memory": "1Gi"}},
        "securityContext": {
            "allowPrivilegeEscalation": False,
            "capabilities": {"drop": ["ALL"]},
            "runAsNonRoot": True,
            "runAsUser": 65532,  # the image's USER (Dockerfile.sidecar)
            "runAsGroup": 65532,
        },
        "volumeMounts": [{"name": TOKEN_VOLUME, "mountPath": TOKEN_PATH, "readOnly": True}],
    }


def token_volume() -> dict[str, Any]:
    """What the kubelet would mount as kube-api-access, for the sidecar alone: a bound,
    expiring token of the pod's ServiceAccount, the cluster CA and the namespace."""
    return {
        "name": TOKEN_VOLUME,
        "projected": {
            "defaultMode": 0o444,
            "sources": [
                {"serviceAccountToken": {"path": "token", "expirationSeconds": 3607}},
                {
                    "configMap": {
                        "name": "kube-root-ca.crt",
                        "items": [{"key": "ca.crt", "path": "ca.crt"}],
                    }
                },
                {
                    "downwardAPI": {
                        "items": [
                            {
                                "path": "namespace",
                                "fieldRef": {"fieldPath": "metadata.namespace"},
                            }
                        ]
                    }
                },
            ],
        },
    }


def check_service_account(service: LLMService) -> None:
    """Decode pods run under the sidecar's ServiceAccount (its SSRF allowlist reads the pool)."""
    account = service.spec.pod_template.service_account_name
    if account:
        raise UserError(
            "spec.podTemplate.serviceAccountName",
            account,
            "disaggregated decode pods run llm-d's routing sidecar under the operator's "
            f"ServiceAccount {sidecar_name(service)} (it reads the InferencePool to refuse "
            "prefill addresses outside it)",
            "remove spec.podTemplate.serviceAccountName, or serve aggregated",
        )


def _metadata(service: LLMService) -> dict[str, Any]:
    labels = {**picker_labels(service), "app.kubernetes.io/component": "routing-sidecar"}
    labels["app.kubernetes.io/name"] = "tokenfleet-routing-sidecar"
    return {"name": sidecar_name(service), "namespace": service.namespace, "labels": labels}


def service_account(service: LLMService) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": _metadata(service)}


def role_binding(service: LLMService, picker_role: str) -> dict[str, Any]:
    """The picker's ClusterRole (pods and inferencepools: get, list, watch), in this
    namespace only, for the sidecar's ServiceAccount."""
    name = sidecar_name(service)
    return {
        "apiVersion": f"{RBAC_GROUP}/v1",
        "kind": "RoleBinding",
        "metadata": _metadata(service),
        "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": service.namespace}],
        "roleRef": {"apiGroup": RBAC_GROUP, "kind": "ClusterRole", "name": picker_role},
    }
