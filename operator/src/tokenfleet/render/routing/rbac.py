"""The endpoint picker's identity: a ServiceAccount, bound to ClusterRoles the chart installs.

The picker's rules live in two ClusterRoles the Helm chart installs once
(charts/tokenfleet/files/rbac-rules.yaml: `picker`, `pickerLeaderElection`); per LLMService
the operator writes only a ServiceAccount and RoleBindings to them in the LLMService's
namespace. The operator needs `bind` on those two ClusterRoles by name, not their rules:
it never holds lease rights, and the picker's reads are granted in that namespace only.

Rules from llm-d/llm-d-router v0.10.0 config/charts/routerlib/templates/_rbac.yaml (pods:
get/watch/list, to track the pool's endpoints) and config/charts/llm-d-router-standalone/
templates/rbac.yaml (inferencepools: get/watch/list, to read its own pool). Left out on
purpose: inferenceobjectives / inferencemodelrewrites (tokenfleet renders none, and the
picker runs without them), and the chart's ClusterRole for tokenreviews /
subjectaccessreviews, which only serves --metrics-endpoint-auth (off here: the metrics
port is inside the cluster, as the engines' are). The chart's copies must equal these (the
chart's system test checks it).
"""

from __future__ import annotations

from typing import Any

from tokenfleet.api import LLMService
from tokenfleet.render.routing.names import picker_labels, picker_metadata, picker_name

POOL_GROUP = "inference.networking.k8s.io"
RBAC_GROUP = "rbac.authorization.k8s.io"
# The chart's ClusterRole names for its default release name (`tokenfleet operator
# --picker-cluster-role`; the chart passes its own).
DEFAULT_PICKER_ROLE = "tokenfleet-endpoint-picker"
LEADER_ELECTION_SUFFIX = "-leader-election"
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


def cluster_roles_for(service: LLMService, picker_role: str) -> tuple[str, ...]:
    """The chart's ClusterRoles this LLMService's picker is bound to."""
    elected = service.spec.routing.picker_replicas > 1
    return (picker_role, *((picker_role + LEADER_ELECTION_SUFFIX,) if elected else ()))


def role_bindings(service: LLMService, picker_role: str) -> list[dict[str, Any]]:
    """One RoleBinding per ClusterRole, in the LLMService's namespace only."""
    name = picker_name(service)
    subject = {"kind": "ServiceAccount", "name": name, "namespace": service.namespace}
    return [
        {
            "apiVersion": f"{RBAC_GROUP}/v1",
            "kind": "RoleBinding",
            "metadata": {
                "name": name + role.removeprefix(picker_role),
                "namespace": service.namespace,
                "labels": picker_labels(service),
            },
            "subjects": [subject],
            "roleRef": {"apiGroup": RBAC_GROUP, "kind": "ClusterRole", "name": role},
        }
        for role in cluster_roles_for(service, picker_role)
    ]
