"""spec.engine.simulate: the same plan, run by `tokenfleet sim` with no GPU, so the loop can
be tried on a cluster without GPUs (kind)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support.render_cases import render_case
from tokenfleet.api import parse_llmservice
from tokenfleet.api.engine import simulator_image
from tokenfleet.cli import build_parser
from tokenfleet.commands.render import render_documents
from tokenfleet.errors import UserError

CASE = "sim-8b-l4-kind"


def _containers(manifests: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        c
        for m in manifests
        if m["kind"] in ("Deployment", "LeaderWorkerSet")
        for c in m["spec"]["template"]["spec"]["containers"]
    ]


def test_no_gpu_is_requested_nor_selected() -> None:
    rendered = render_case(CASE)
    text = json.dumps(rendered.manifests)
    assert "nvidia.com/gpu" not in text and "amd.com/gpu" not in text
    (deployment,) = [m for m in rendered.manifests if m["kind"] == "Deployment"]
    pod = deployment["spec"]["template"]["spec"]
    assert "nodeSelector" not in pod  # no GPU node label on a kind node
    (container,) = pod["containers"]
    assert container["image"] == simulator_image()
    assert container["command"] == ["tokenfleet", "sim"]
    assert container["securityContext"]["runAsNonRoot"] is True


def test_the_simulator_is_sized_by_the_plan_and_its_own_parser_accepts_it() -> None:
    rendered = render_case(CASE)
    (container,) = _containers(rendered.manifests)
    args = build_parser().parse_args(["sim", *container["args"]])
    plan = rendered.plan
    assert (args.gpu, args.engine, args.engine_version) == (
        plan.gpu.id,
        plan.engine,
        plan.engine_version,
    )
    assert (args.tp, args.pp, args.max_model_len) == (
        plan.tensor_parallel_size,
        plan.pipeline_parallel_size,
        plan.max_model_len,
    )
    assert (args.max_num_seqs, args.kv_cache_tokens) == (plan.max_num_seqs, plan.kv_cache_tokens)
    assert args.served_model_name == "llama-3.1-8b"
    port = container["ports"][0]["containerPort"]
    assert args.port == port and container["readinessProbe"]["httpGet"]["path"] == "/health"


def test_off_by_default_the_engine_runs_on_its_gpu() -> None:
    rendered = render_case("vllm-8b-l4-minimal")
    (container,) = _containers(rendered.manifests)
    assert (
        container["command"][0] == "vllm" and "nvidia.com/gpu" in container["resources"]["limits"]
    )


def _service(**spec: Any) -> dict[str, Any]:
    path = Path(__file__).parent / "cases" / f"{CASE}.yaml"
    body = yaml.safe_load(path.read_text())
    body["spec"].update(spec)
    return body


@pytest.mark.parametrize(
    ("spec", "fragment"),
    [
        (
            {"model": {"id": "meta-llama/Llama-3.1-405B"}, "gpu": {"type": "h100-sxm"}},
            "spans",
        ),
        (
            {
                "model": {
                    "id": "acme/private-7b",
                    "config": {
                        "model_type": "llama",
                        "hidden_size": 4096,
                        "intermediate_size": 11008,
                        "num_hidden_layers": 32,
                        "num_attention_heads": 32,
                        "num_key_value_heads": 32,
                        "vocab_size": 32000,
                        "max_position_embeddings": 8192,
                    },
                }
            },
            "not in it",
        ),
        (
            {
                "lora": {"loading": "static"},
                "adapters": [{"name": "legal", "source": "s3://adapters/legal"}],
            },
            "adapter legal is fetched by an init step",
        ),
    ],
)
def test_what_the_simulator_cannot_stand_in_for_is_refused(
    spec: dict[str, Any], fragment: str
) -> None:
    with pytest.raises(UserError) as error:
        render_documents([_service(**spec)], "in.yaml")
    assert "spec.engine.simulate" in str(error.value) and fragment in str(error.value)


def test_simulate_is_in_the_api() -> None:
    service = parse_llmservice(_service())
    assert service.spec.engine.simulate is True
    assert parse_llmservice(_service(engine={"kind": "vllm"})).spec.engine.simulate is False


def test_the_simulator_gets_the_plans_lora_slots() -> None:
    (rendered,) = render_documents(
        [_service(adapters=[{"name": "chat", "source": "pvc://loras/chat"}],
                  lora={"maxLoras": 2, "maxRank": 8})],
        "in.yaml",
    )  # fmt: skip
    deployment = next(m for m in rendered.manifests if m["kind"] == "Deployment")
    args = deployment["spec"]["template"]["spec"]["containers"][0]["args"]
    at = args.index("--enable-lora")
    assert args[at : at + 5] == ["--enable-lora", "--max-loras", "2", "--max-lora-rank", "8"]
    assert build_parser().parse_args(["sim", *args]).max_loras == 2
