"""LoRA adapters in the rendered engine pod (render/adapters.py) and the endpoint picker."""

from __future__ import annotations

from typing import Any

import yaml

from tests.support.render_cases import render_case
from tokenfleet import render
from tokenfleet.api import parse_llmservice, plan_service, to_plan_request
from tokenfleet.render import routing

DYNAMIC = "vllm-8b-lora-dynamic"
STATIC = "sglang-8b-lora-static"


def pod(name: str, **update: Any) -> dict[str, Any]:
    """The engine pod template of a render case, with spec fields replaced and re-planned."""
    r = render_case(name)
    service, plan = r.service, r.plan
    if update:
        spec = service.spec.model_dump(by_alias=True, exclude_none=True)
        spec.update(update)
        service = parse_llmservice({**service.to_dict(), "spec": spec})
        plan = plan_service(to_plan_request(service))
    deployment = render.all(service, plan, routing_available=False)[0]
    assert deployment["kind"] == "Deployment"
    return dict(deployment["spec"]["template"])


def engine(template: dict[str, Any]) -> dict[str, Any]:
    (container,) = template["spec"]["containers"]
    return dict(container)


def env(container: dict[str, Any]) -> dict[str, Any]:
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in container["env"]}


def test_dynamic_loading_gates_the_pod_and_turns_vllms_endpoints_on() -> None:
    template = pod(DYNAMIC)
    container = engine(template)
    assert template["spec"]["readinessGates"] == [
        {"conditionType": "tokenfleet.dev/adapters-loaded"}
    ]
    assert env(container)["VLLM_ALLOW_RUNTIME_LORA_UPDATING"] == "True"
    # The model names no Hub token; the adapters' is the engine's (it downloads them).
    assert env(container)["HF_TOKEN"] == {
        "secretKeyRef": {"name": "hf-adapters", "key": "HF_TOKEN"}
    }
    args = container["args"]
    assert "--lora-modules" not in args and "initContainers" not in template["spec"]
    assert args[args.index("--max-lora-rank") + 1] == "32"  # the largest rank listed
    at = args.index("--lora-target-modules")
    assert args[at + 1 : at + 5] == ["q_proj", "k_proj", "v_proj", "o_proj"]
    mount = {"name": "adapters-lora-adapters", "mountPath": "/mnt/adapters/lora-adapters",
             "readOnly": True}  # fmt: skip
    assert mount in container["volumeMounts"]
    claim = {"claimName": "lora-adapters", "readOnly": True}
    assert {"name": "adapters-lora-adapters", "persistentVolumeClaim": claim} in template["spec"][
        "volumes"
    ]


def test_a_changed_adapter_list_leaves_a_dynamic_pod_template_alone() -> None:
    """Adding or removing adapters within the slots (re-planned each time) changes no engine
    flag and no pod field: the operator loads them on the running pods. What does change it:
    a rank above the slots' (it re-sizes them), and the last adapter of a claim (its volume)."""
    adapters = render_case(DYNAMIC).service.spec.to_dict()["adapters"]
    sql, chat = adapters
    before = pod(DYNAMIC)
    summary = {"name": "summary", "source": "pvc://lora-adapters/summary", "rank": 8}
    assert pod(DYNAMIC, adapters=[sql, chat, summary]) == before
    assert pod(DYNAMIC, adapters=[sql, summary]) == before  # same claim, another adapter
    assert pod(DYNAMIC, adapters=[sql, chat, {**summary, "rank": 64}]) != before
    volumes = pod(DYNAMIC, adapters=[sql])["spec"].get("volumes") or []
    assert all(not v["name"].startswith("adapters-") for v in volumes)


def test_static_loading_fetches_lists_and_pins() -> None:
    template = pod(STATIC)
    container = engine(template)
    assert "readinessGates" not in template["spec"]
    assert "VLLM_ALLOW_RUNTIME_LORA_UPDATING" not in env(container)
    args = container["args"]
    # SGLang: one slot more for the base model; --max-loaded-loras at least the batch.
    assert args[args.index("--max-loras-per-batch") + 1] == "3"
    assert args[args.index("--lora-target-modules") + 1] == "all"
    assert args[args.index("--max-loaded-loras") + 1] == "8"
    paths = args[args.index("--lora-paths") + 1 :]
    assert paths[0] == '{"lora_name":"sql","lora_path":"/model-cache/adapters/sql","pinned":true}'
    assert paths[1:3] == [
        "legal=/model-cache/adapters/legal",
        "chat=/mnt/adapters/lora-adapters/chat",
    ]
    fetch = {c["name"]: c for c in template["spec"]["initContainers"]}
    assert set(fetch) == {"fetch-sql", "fetch-legal"}  # the PVC needs no fetch
    sql, legal = fetch["fetch-sql"], fetch["fetch-legal"]
    assert sql["image"] == container["image"]  # huggingface_hub ships in the engine image
    assert sql["command"][-3:] == ["example-org/sql-lora", "v2", "/model-cache/adapters/sql"]
    assert env(sql)["HF_TOKEN"] == {"secretKeyRef": {"name": "hf-token", "key": "HF_TOKEN"}}
    assert legal["image"].startswith("amazon/aws-cli:")
    assert legal["command"] == [
        "aws", "s3", "sync", "s3://example-adapters/legal/v1", "/model-cache/adapters/legal",
        "--only-show-errors",
    ]  # fmt: skip
    assert legal["envFrom"] == [{"secretRef": {"name": "s3-adapters"}}]
    for step in fetch.values():  # no secret value anywhere: references only
        assert all("value" not in e or e["name"] == "HOME" or "HF_HOME" in e["name"]
                   for e in step["env"])  # fmt: skip
        assert step["securityContext"]["runAsNonRoot"] is True


def test_a_changed_adapter_list_rolls_a_static_pod() -> None:
    adapters = render_case(STATIC).service.spec.to_dict()["adapters"]
    assert pod(STATIC, adapters=adapters[:2]) != pod(STATIC)


def picker_scorers(name: str) -> dict[str, int]:
    r = render_case(name)
    (deployment,) = [
        m for m in routing.manifests(r.service, r.plan) if m["metadata"]["name"].endswith("-epp")
        and m["kind"] == "Deployment"
    ]  # fmt: skip
    args = deployment["spec"]["template"]["spec"]["containers"][0]["args"]
    text = next(a for a in args if a.startswith("--config-text="))
    config = yaml.safe_load(text.removeprefix("--config-text="))
    (profile,) = config["schedulingProfiles"]
    return {p["pluginRef"]: p["weight"] for p in profile["plugins"]}


def test_the_picker_prefers_pods_running_the_adapter_on_vllm() -> None:
    assert picker_scorers(DYNAMIC)["lora-affinity-scorer"] == 1
    assert "lora-affinity-scorer" not in picker_scorers("vllm-8b-l4-routing-zero")
