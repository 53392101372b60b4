"""The endpoint picker (EPP): its configuration, Deployment and Service.

Everything here follows llm-d/llm-d-router v0.10.0 (engines.images.PICKER_VERSION):
- flags: pkg/epp/server/options.go (--pool-name, --pool-namespace, --pool-group,
  --config-text, --grpc-port, --grpc-health-port, --metrics-port, --metrics-endpoint-auth,
  --ha-enable-leader-election); ports 9002 (ext-proc gRPC the Gateway
  calls), 9003 (gRPC health), 9090 (Prometheus metrics), as in config/charts/routerlib/
  templates/_deployment.yaml and _service.yaml;
- config: apix/config/v1alpha1/endpointpickerconfig_types.go (EndpointPickerConfig,
  group llm-d.ai): the chart's default profile (_config.yaml) of queue-scorer (weight 2),
  kv-cache-utilization-scorer (2) and prefix-cache-scorer (3) over the metrics-data-source /
  core-metrics-extractor pair, which reads vLLM's or SGLang's /metrics;
- LoRA (spec.adapters, vLLM only): lora-affinity-scorer
  (pkg/epp/framework/plugins/scheduling/scorer/loraaffinity/lora_affinity.go): 1.0 for a pod
  running the requested adapter, 0.8 for one with a free slot, 0.6 for one where it waits,
  from the extractor's LoRASpec `vllm:lora_requests_info` (running_lora_adapters,
  waiting_lora_adapters, max_lora; datalayer/extractor/metrics/factories.go). Weight 1: the
  plugin README's example and the loader's DefaultScorerWeight (pkg/epp/config/loader/
  defaults.go). SGLang's engine config there has no LoRASpec, so the scorer would see no
  adapter anywhere; it is not rendered for SGLang;
- disaggregated serving: the disaggregation profile of render/routing/disagg.py;
- flow control (pkg/epp/flowcontrol/README.md): off by default, on through the
  `flowControl` feature gate. With minReplicas 0 it is the waiting room that holds requests
  while the pool has no endpoints; defaultRequestTTL bounds the wait.
"""

from __future__ import annotations

from typing import Any

import yaml

from tokenfleet.api import LLMService
from tokenfleet.capacity.types import Plan
from tokenfleet.engines import engine, engine_info
from tokenfleet.engines.images import DEFAULT_IMAGES, ImageTable, picker_image
from tokenfleet.render.monitoring import service_relabelings
from tokenfleet.render.routing import disagg
from tokenfleet.render.routing.names import (
    picker_metadata,
    picker_name,
    picker_pod_labels,
    picker_selector,
)

EXT_PROC_PORT = 9002
HEALTH_PORT = 9003
METRICS_PORT = 9090
# Scorer weights of llm-d-router's default profile: prefix affinity first, then load.
SCORERS = (("queue-scorer", 2), ("kv-cache-utilization-scorer", 2), ("prefix-cache-scorer", 3))
LORA_SCORER = ("lora-affinity-scorer", 1)


def scorers(service: LLMService, plan: Plan) -> tuple[tuple[str, int], ...]:
    """The profile's scorers: the default three, and LoRA affinity when vLLM serves adapters
    (the engine the extractor reads adapters from)."""
    if service.spec.lora_enabled and engine(plan.engine).picker_reads_adapters:
        return (*SCORERS, LORA_SCORER)
    return SCORERS


def scales_to_zero(service: LLMService) -> bool:
    auto = service.spec.autoscaling
    return auto.enabled and auto.min_replicas == 0


def picker_config(service: LLMService, plan: Plan) -> dict[str, Any]:
    """The EndpointPickerConfig document the picker reads from --config-text."""
    info = engine_info(plan.engine)
    extractor: dict[str, Any] = {"type": "core-metrics-extractor"}
    if not engine(plan.engine).picker_default:
        extractor["parameters"] = {"defaultEngine": plan.engine}
    chosen = scorers(service, plan)
    disaggregated = plan.serving is not None and plan.serving.roles is not None
    config: dict[str, Any] = {
        "apiVersion": "llm-d.ai/v1alpha1",
        "kind": "EndpointPickerConfig",
        "plugins": [
            *(disagg.plugins() if disaggregated else ()),
            *({"type": name} for name, _ in chosen),
            {
                "type": "metrics-data-source",
                "parameters": {"scheme": "http", "path": info.metrics_path},
            },
            extractor,
        ],
        "schedulingProfiles": (
            disagg.profiles(chosen)
            if disaggregated
            else [
                {
                    "name": "default",
                    "plugins": [{"pluginRef": name, "weight": weight} for name, weight in chosen],
                }
            ]
        ),
    }
    if scales_to_zero(service):
        config["featureGates"] = ["flowControl"]
        config["flowControl"] = {
            "defaultRequestTTL": f"{service.spec.routing.queue_ttl_seconds}s",
        }
    return config


def picker_args(service: LLMService, plan: Plan) -> list[str]:
    # The config as text, not a ConfigMap: the operator needs no right to write ConfigMaps,
    # and a changed config is a changed pod template, which rolls the picker.
    config = yaml.safe_dump(picker_config(service, plan), sort_keys=False)
    args = [
        f"--pool-name={service.name}",
        f"--pool-namespace={service.namespace}",
        "--pool-group=inference.networking.k8s.io",
        f"--config-text={config}",
        f"--grpc-port={EXT_PROC_PORT}",
        f"--grpc-health-port={HEALTH_PORT}",
        f"--metrics-port={METRICS_PORT}",
        # Prometheus scrapes the picker like the engines, inside the cluster, without a
        # token; auth would need a ClusterRole for token and access reviews.
        "--metrics-endpoint-auth=false",
    ]
    if service.spec.routing.picker_replicas > 1:
        args.append("--ha-enable-leader-election")
    return args


def _probe(grpc_service: str, period: int) -> dict[str, Any]:
    return {"grpc": {"port": HEALTH_PORT, "service": grpc_service}, "periodSeconds": period}


def deployment(
    service: LLMService, plan: Plan, images: ImageTable = DEFAULT_IMAGES
) -> dict[str, Any]:
    replicas = service.spec.routing.picker_replicas
    # With leader election the chart probes liveness / readiness apart (only the leader is
    # ready); a single picker answers "inference-extension" for both.
    live, ready = ("liveness", "readiness") if replicas > 1 else ("inference-extension",) * 2
    pod_security = {
        "runAsNonRoot": True,
        "runAsUser": 65532,  # the image's USER (Dockerfile.epp)
        "runAsGroup": 65532,
        "seccompProfile": {"type": "RuntimeDefault"},
    }
    container_security = {
        "allowPrivilegeEscalation": False,
        "capabilities": {"drop": ["ALL"]},
    }
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": picker_metadata(service),
        "spec": {
            "replicas": replicas,
            # One active picker (its prefix index is in memory): Recreate, as the chart does,
            # so an update never runs two scorers with split indexes.
            "strategy": {"type": "Recreate"},
            "selector": {"matchLabels": picker_selector(service)},
            "template": {
                "metadata": {"labels": picker_pod_labels(service)},
                "spec": {
                    "serviceAccountName": picker_name(service),
                    # Unlike the engines, the picker reads the API (its pool and the pods).
                    "automountServiceAccountToken": True,
                    "securityContext": pod_security,
                    # Longer than an engine request may take: a picker stopped mid-request
                    # would cut the stream the Gateway holds through it.
                    "terminationGracePeriodSeconds": 130,
                    "containers": [
                        {
                            "name": "epp",
                            "image": picker_image(images),
                            "imagePullPolicy": "IfNotPresent",
                            "args": picker_args(service, plan),
                            "ports": [
                                {"name": "grpc", "containerPort": EXT_PROC_PORT},
                                {"name": "grpc-health", "containerPort": HEALTH_PORT},
                                {"name": "metrics", "containerPort": METRICS_PORT},
                            ],
                            "livenessProbe": {**_probe(live, 10), "initialDelaySeconds": 5},
                            "readinessProbe": _probe(ready, 2),
                            "env": [
                                {
                                    "name": "NAMESPACE",
                                    "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}},
                                },
                                {
                                    "name": "POD_NAME",
                                    "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}},
                                },
                            ],
                            # The chart asks 8 CPUs for fleets of hundreds of pods; one
                            # LLMService's pool is small: 1 CPU, memory capped as it does.
                            "resources": {
                                "requests": {"cpu": "1", "memory": "1Gi"},
                                "limits": {"memory": "4Gi"},
                            },
                            "securityContext": container_security,
                        }
                    ],
                },
            },
        },
    }


def picker_service(service: LLMService) -> dict[str, Any]:
    """The Service the InferencePool's endpointPickerRef names (the Gateway calls 9002)."""
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": picker_metadata(service),
        "spec": {
            "type": "ClusterIP",
            "selector": picker_selector(service),
            "ports": [
                {
                    "name": "grpc-ext-proc",
                    "port": EXT_PROC_PORT,
                    "targetPort": "grpc",
                    "protocol": "TCP",
                    "appProtocol": "kubernetes.io/h2c",
                },
                {
                    "name": "http-metrics",
                    "port": METRICS_PORT,
                    "targetPort": "metrics",
                    "protocol": "TCP",
                },
            ],
        },
    }


def picker_pod_monitor(service: LLMService) -> dict[str, Any]:
    """Scrapes the picker: its flow-control queue is the scale-from-zero signal."""
    return {
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "PodMonitor",
        "metadata": picker_metadata(service),
        "spec": {
            "selector": {"matchLabels": picker_selector(service)},
            "podMetricsEndpoints": [
                {
                    "port": "metrics",
                    "path": "/metrics",
                    "interval": "15s",
                    "relabelings": service_relabelings(service),
                }
            ],
        },
    }
