"""The endpoint picker's identity: a ServiceAccount and a least-privilege Role + RoleBinding.

Rules from llm-d/llm-d-router v0.10.0 config/charts/routerlib/templates/_rbac.yaml (pods:
get/watch/list, to track the pool's endpoints) and config/charts/llm-d-router-standalone/
templates/rbac.yaml (inferencepools: get/watch/list, to read its own pool). Left out on
purpose: inferenceobjectives / inferencemodelrewrites (tokenfleet renders none, and the
picker runs without them), and the chart's ClusterRole for tokenreviews /
subjectaccessreviews, which only serves --metrics-endpoint-auth (off here: the metrics
port is inside the cluster, as the engines' are). The operator must hold every rule it
grants (RBAC escalation prevention), so the chart grants the operator the same rules; the
recorded-request test (test_rbac.py) derives them from PICKER_RULES and
LEADER_ELECTION_RULES.
"""

from __future__ import annotations

from typing import Any

from tokenfleet.api import LLMService
from tokenfleet.render.routing.names import picker_metadata, picker_name

POOL_GROUP = "inference.networking.k8s.io"
PICKER_RULES: tuple[dict[str, Any], ...] = (
    {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "watch", "list"]},
    {"apiGroups": [POOL_GROUP], "resources": ["inferencepools"], "verbs": ["get", "watch", "list"]},
)
# Only with spec.routing.pickerReplicas > 1 (--ha-enable-leader-election): the lease the
# replicas elect a leader with, and its events; config/charts/routerlib/templates/
# _leader-election-rbac.yaml of the same version.
LEADER_ELECTION_RULES: tuple[dict[str, Any], ...] = (
    {
        "apiGroups": ["coordination.k8s.io"],
        "resources": ["leases"],
        "verbs": ["get", "list", "watch", "create", "update", "patch", "delete"],
    },
    {"apiGroups": [""], "resources": ["events"], "verbs": ["create", "patch"]},
)


def service_account(service: LLMService) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ServiceAccount",
        "metadata": picker_metadata(service),
    }


def rules_for(service: LLMService) -> tuple[dict[str, Any], ...]:
    elected = service.spec.routing.picker_replicas > 1
    return PICKER_RULES + (LEADER_ELECTION_RULES if elected else ())


def role(service: LLMService) -> dict[str, Any]:
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "Role",
        "metadata": picker_metadata(service),
        "rules": [{key: list(value) for key, value in rule.items()} for rule in rules_for(service)],
    }


def role_binding(service: LLMService) -> dict[str, Any]:
    name = picker_name(service)
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "RoleBinding",
        "metadata": picker_metadata(service),
        "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": service.namespace}],
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
    }
