"""The chart's RBAC is exactly what the operator uses: every request the real operator
(kopf + our controller, peered as the chart runs it) sends to the emulated apiserver is
recorded as (apiGroup, resource[/subresource], verb), and compared with the rules of the
chart's roles (charts/tokenfleet/files/rbac-rules.yaml, as templates/rbac.yaml uses them).
A verb the code calls that the rules lack fails; so does a granted verb never used.

Both of the chart's modes: cluster-wide (a ClusterRole, with the cluster-scoped
ClusterKopfPeering) and `watchNamespaces` (a Role per namespace, with the namespaced
KopfPeering). A Role grants nothing outside its namespace, so in that mode every request
must also name a watched namespace: a cluster-wide list or watch would be refused.

The scenario touches every path that talks to the API: a Deployment with a model-cache PVC,
a LoRA adapter loaded on an engine pod (a small stand-in engine answers on loopback) whose
readiness gate the operator then sets (pods/status),
a Service, a PDB and a PodMonitor; a LeaderWorkerSet; a ConfigMap read; status writes;
kopf's annotations, events and peering; an edit of an owned object (drift -> re-apply);
an autoscaler scale-down (the scale subresource, pod-deletion-cost on the engine pods); a
prune (the model-cache claim removed with retain false). Prune may delete any kind render
produces (controller.ownership.RENDERED_KINDS): the delete grants are derived from that
list, and the scenario shows the recorded deletes come from it.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from aiohttp import web

from tests.support.autoscaler_stubs import URL, Source, StubPolicy
from tests.support.cluster_objects import PVCS, condition, create, example, llms
from tests.support.operator_harness import NAMESPACE, StartOperator, eventually
from tokenfleet.controller.kube import PLURALS
from tokenfleet.controller.ownership import RENDERED_KINDS
from tokenfleet.render.routing import DEFAULT_PICKER_ROLE, LEADER_ELECTION_SUFFIX
from tokenfleet.testing.kmock_cluster import (
    APPLY,
    HTTPROUTES,
    INFERENCEPOOLS,
    LWS,
    NS_PEERINGS,
    PEERINGS,
    PODMONITORS,
    Cluster,
)

RULES = Path(__file__).resolve().parents[2] / "charts" / "tokenfleet" / "files" / "rbac-rules.yaml"
OPERATOR_TOKEN = (
    "Bearer test-token"  # operator_harness.kubeconfig_for; the test's client sends none
)
DEPLOYMENTS = "apps/v1/deployments"
ROLEBINDINGS = "rbac.authorization.k8s.io/v1/rolebindings"
# A PATCH is RBAC verb patch; a server-side apply that creates the object also needs create.
VERBS = {"LIST": "list", "WATCH": "watch", "FETCH": "get", "CREATE": "create", "DELETE": "delete"}

Grant = tuple[str, str, str]  # (apiGroup, resource or resource/subresource, verb)


def granted(rules: list[dict[str, Any]]) -> set[Grant]:
    return {
        (group, resource, verb)
        for rule in rules
        for group in rule["apiGroups"]
        for resource in rule["resources"]
        for verb in rule["verbs"]
    }


# The routing Role's `bind`, which templates/rbac.yaml adds to files/rbac-rules.yaml's
# `routing` rules with the picker ClusterRoles' names.
BIND = ("rbac.authorization.k8s.io", "clusterroles", "bind")
ROUTING_RESOURCES = {"serviceaccounts", "rolebindings", "inferencepools", "httproutes"}


def chart_grants(clusterwide: bool) -> set[Grant]:
    """The operator's own rules plus, in the test's namespace (a routing namespace in both
    modes), the routing Role's."""
    rules = yaml.safe_load(RULES.read_text())
    peering = rules["peering"]["cluster" if clusterwide else "namespaced"]
    return granted(rules["namespaced"] + peering + rules["routing"]) | {BIND}


# Where each request went: (resource, namespace or None for a cluster-wide call).
Scope = tuple[str, str | None]


@pytest.fixture
def scopes() -> set[Scope]:
    return set()


@pytest.fixture
def recorded(cluster: Cluster, monkeypatch: pytest.MonkeyPatch, scopes: set[Scope]) -> set[Grant]:
    """(group, resource, verb) of every request the operator sends from now on; `scopes`
    gets where each went."""
    seen: set[Grant] = set()
    original = Cluster._handle

    async def handle(self: Cluster, request: Any) -> Any:
        if (
            request.headers.get("Authorization") == OPERATOR_TOKEN
            and request.resource is not None
            and request.resource.plural
            and request.action is not None
        ):
            res = request.resource
            name = res.plural + (f"/{request.subresource}" if request.subresource else "")
            group = res.group or ""
            action = request.action.name
            scopes.add((res.plural, request.namespace))
            if action == "UPDATE":
                verb = "update" if str(request.method.value).upper() == "PUT" else "patch"
                seen.add((group, name, verb))
                ns = None if res.plural in ("clusterkopfpeerings",) else request.namespace
                creates = APPLY in request.headers.get("Content-Type", "")
                if creates and (res, ns, request.name) not in self.objects:
                    seen.add((group, name, "create"))
            else:
                seen.add((group, name, VERBS[action]))
        return await original(self, request)

    monkeypatch.setattr(Cluster, "_handle", handle)
    return seen


@pytest.fixture
async def engine_port() -> AsyncIterator[int]:
    """A stand-in vLLM on loopback: lists no adapter, loads any."""

    async def models(request: web.Request) -> web.Response:
        return web.json_response({"object": "list", "data": [{"id": "base", "parent": None}]})

    async def load(request: web.Request) -> web.Response:
        return web.Response(text="Success")

    app = web.Application()
    app.router.add_get("/v1/models", models)
    app.router.add_post("/v1/load_lora_adapter", load)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    yield int(site._server.sockets[0].getsockname()[1])  # type: ignore[union-attr]
    await runner.cleanup()


@pytest.mark.parametrize("clusterwide", [True, False], ids=["cluster-wide", "namespaced"])
async def test_chart_rbac_is_exactly_what_the_operator_uses(
    cluster: Cluster,
    start_operator: StartOperator,
    recorded: set[Grant],
    scopes: set[Scope],
    clusterwide: bool,
    engine_port: int,
) -> None:
    peerings = PEERINGS if clusterwide else NS_PEERINGS
    for optional in (LWS, PODMONITORS, INFERENCEPOOLS, HTTPROUTES, peerings):
        cluster.install(optional)
    # The peering object the chart's replicas share (kopf creates none; it patches it).
    if clusterwide:
        peering = {"apiVersion": "kopf.dev/v1", "kind": "ClusterKopfPeering",
                   "metadata": {"name": "tf"}}  # fmt: skip
        await create(cluster, peering, "/apis/kopf.dev/v1/clusterkopfpeerings")
    else:
        peering = {"apiVersion": "kopf.dev/v1", "kind": "KopfPeering",
                   "metadata": {"name": "tf", "namespace": NAMESPACE}}  # fmt: skip
        await create(cluster, peering, f"/apis/kopf.dev/v1/namespaces/{NAMESPACE}/kopfpeerings")
    # Every autoscaled LLMService is asked down to 1 replica (the signals are injected).
    autoscaler = {"source": Source(load={"engine-0": 3.0}), "decide": StubPolicy(1), "url": URL}
    await start_operator(
        peering="tf",
        priority=100,
        autoscaler=autoscaler,
        namespaces=None if clusterwide else [NAMESPACE],
    )
    await create(
        cluster,
        {"apiVersion": "v1", "kind": "Pod",
         "metadata": {"name": "engine-0", "labels": {"tokenfleet.dev/llmservice": "llama-3-1-8b"}}},
        f"/api/v1/namespaces/{NAMESPACE}/pods",
    )  # fmt: skip
    # A serving engine pod of an LLMService with an adapter: loaded, then the pod's gate set.
    lora = example("llama-3.1-8b-l4.yaml")
    lora["metadata"]["name"] = "adapters-8b"
    lora["spec"]["model"]["servedName"] = "base"
    lora["spec"]["adapters"] = [{"name": "sql", "source": "hf://org/sql"}]
    lora["spec"].pop("autoscaling", None)
    await create(cluster, lora)
    await create(
        cluster,
        {"apiVersion": "v1", "kind": "Pod",
         "metadata": {"name": "adapters-0", "labels": {"tokenfleet.dev/llmservice": "adapters-8b",
                                                      "tokenfleet.dev/role": "server"}},
         "spec": {"containers": [{"name": "engine", "ports": [
             {"name": "http", "containerPort": engine_port}]}]},
         "status": {"podIP": "127.0.0.1",
                    "containerStatuses": [{"name": "engine", "ready": True}]}},
        f"/api/v1/namespaces/{NAMESPACE}/pods",
    )  # fmt: skip
    config_map = example("qwen2.5-7b-configmap.yaml", kind="ConfigMap")
    await create(cluster, config_map, f"/api/v1/namespaces/{NAMESPACE}/configmaps")
    names = []
    for file in (
        "llama-3.1-8b-l4.yaml",
        "llama-3.1-405b-multinode.yaml",
        "qwen2.5-7b-configmap.yaml",
        "llama-3.1-8b-l4-scale-to-zero.yaml",
    ):
        body = example(file)
        if file == "llama-3.1-8b-l4.yaml":
            body["spec"]["replicas"] = 2  # the autoscaler scales it down
            body["spec"]["autoscaling"]["intervalSeconds"] = 5
        names.append(body["metadata"]["name"])
        await create(cluster, body)
    names.append("adapters-8b")
    for name in names:
        await eventually(
            lambda name=name: condition(cluster, name, "Degraded").get("status") == "False",
            what=f"{name} reconciled",
        )
    # Drift: someone edits the Deployment by hand; the operator re-applies it.
    path = f"/apis/apps/v1/namespaces/{NAMESPACE}/deployments/llama-3-1-8b"
    response = await cluster.patch(
        path, json={"metadata": {"labels": {"edited": "yes"}}},
        headers={"Content-Type": "application/merge-patch+json"},
    )  # fmt: skip
    assert response.status < 300
    # Prune: the claim opted out of retention, then storage removed -> the claim is deleted.
    llms_path = f"/apis/tokenfleet.dev/v1alpha1/namespaces/{NAMESPACE}/llmservices/llama-3-1-8b"
    merge = {"Content-Type": "application/merge-patch+json"}
    storage = {"spec": {"storage": {"size": "50Gi", "retain": False}}}
    assert (await cluster.patch(llms_path, json=storage, headers=merge)).status < 300

    def retain_off() -> bool:
        found = cluster.get(PVCS, NAMESPACE, "llama-3-1-8b-model-cache") or {}
        annotations = found.get("metadata", {}).get("annotations", {})
        return bool(annotations.get("tokenfleet.dev/retain") == "false")

    await eventually(retain_off, what="the claim's retain policy")
    removed = {"spec": {"storage": None}}
    assert (await cluster.patch(llms_path, json=removed, headers=merge)).status < 300
    await eventually(lambda: ("", "persistentvolumeclaims", "delete") in recorded, what="prune")
    # A RoleBinding to a ClusterRole needs `bind` on it: the picker's, and only those.
    bound = {b["roleRef"]["name"] for b in cluster.items(ROLEBINDINGS) if owned_by_us(b)}
    assert bound and bound <= {DEFAULT_PICKER_ROLE, DEFAULT_PICKER_ROLE + LEADER_ELECTION_SUFFIX}
    # Routing off (minReplicas up first: 0 needs routing): the picker and pool are pruned.
    zero = f"/apis/tokenfleet.dev/v1alpha1/namespaces/{NAMESPACE}/llmservices/llama-3-1-8b-zero"
    no_zero = {"spec": {"autoscaling": {"minReplicas": 1}}}
    assert (await cluster.patch(zero, json=no_zero, headers=merge)).status < 300
    no_routing = {"spec": {"routing": {"enabled": False}}}
    assert (await cluster.patch(zero, json=no_routing, headers=merge)).status < 300
    await eventually(
        lambda: ("inference.networking.k8s.io", "inferencepools", "delete") in recorded,
        what="the routing objects pruned",
    )
    prunable = {(api.rpartition("/")[0], PLURALS[kind], "delete") for api, kind in RENDERED_KINDS}
    deletes = {grant for grant in recorded if grant[2] == "delete"}
    assert deletes <= prunable, f"deletes outside what prune may touch: {deletes - prunable}"
    recorded |= prunable
    recorded.add(BIND)  # held to be granted (the RoleBindings above needed it)
    grants = chart_grants(clusterwide)
    # kopf's own writes (annotations, events) follow our handler: wait for them; a verb
    # never used times out here and is named by the assertion below.
    with contextlib.suppress(AssertionError):
        await eventually(lambda: grants <= recorded, what="every granted verb used")
    # Scaled down. A spec edit above may have won over one decision (the scale patch carries
    # the resourceVersion it read): the next tick decides again.
    await eventually(
        lambda: llms(cluster, "llama-3-1-8b")["spec"]["replicas"] == 1, what="the scale-down"
    )

    used = set(recorded)
    missing = sorted(used - grants)
    unused = sorted(grants - used)
    assert not missing, f"the chart's Role lacks what the operator calls: {missing}"
    assert not unused, f"the chart's Role grants what the operator never calls: {unused}"
    if not clusterwide:
        outside = sorted((r, ns) for r, ns in scopes if ns != NAMESPACE)
        assert not outside, f"requests a Role in {NAMESPACE} cannot grant: {outside}"
    # Routing's rights are a Role in the routing namespaces, in both modes.
    routed = sorted((r, ns) for r, ns in scopes if r in ROUTING_RESOURCES and ns != NAMESPACE)
    assert not routed, f"routing requests outside the routing namespace: {routed}"


def owned_by_us(obj: dict[str, Any]) -> bool:
    labels = obj["metadata"].get("labels") or {}
    return bool(labels.get("app.kubernetes.io/managed-by") == "tokenfleet")


def test_grants_expand_rules() -> None:
    """The comparison above works on single grants; a rule fans out over its lists."""
    rules = [{"apiGroups": ["", "apps"], "resources": ["a", "b"], "verbs": ["get"]}]
    assert granted(rules) == {
        ("", "a", "get"),
        ("", "b", "get"),
        ("apps", "a", "get"),
        ("apps", "b", "get"),
    }
