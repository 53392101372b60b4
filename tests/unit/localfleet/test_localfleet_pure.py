"""The local fleet's pure parts: a rendered Deployment -> `tokenfleet sim` arguments (from the
operator's own render of the examples, vLLM and SGLang), scrape targets, statuses, the
ReplicaSet's deletion order input, the demo's load schedule and view line."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import pytest

from tokenfleet.commands.render import load_documents, render_documents
from tokenfleet.commands.sim import add_arguments
from tokenfleet.localfleet.demo import Schedule
from tokenfleet.localfleet.observe import Row, Slo, _fraction_within
from tokenfleet.localfleet.pods import (
    PodSpecError,
    deletion_cost,
    deployment_status,
    engine_deployment,
    pod_manifest,
    sim_args,
    target_group,
)
from tokenfleet.localfleet.view import plan_header, row_line

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"


def deployment_of(example: str) -> dict[str, Any]:
    path = EXAMPLES / example
    (rendered,) = render_documents(load_documents(str(path)), str(path))
    return next(m for m in rendered.manifests if m["kind"] == "Deployment")


def parse_sim(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_arguments(parser, "sim")
    return parser.parse_args(argv)


@pytest.mark.parametrize(
    ("example", "expected"),
    [
        (
            "llama-3.1-8b-l4-autoscale.yaml",
            {
                "engine": "vllm",
                "gpu": "l4",
                "model": "meta-llama/Llama-3.1-8B",
                "tp": 1,
                "max_model_len": 8192,
                "served_model_name": "llama-3.1-8b",
                "time_scale": 10.0,
            },
        ),
        (
            "qwen3-32b-sglang.yaml",
            {"engine": "sglang", "gpu": "l40s", "time_scale": 10.0},
        ),
    ],
)
def test_sim_args_follow_the_rendered_engine_command(
    example: str, expected: dict[str, Any]
) -> None:
    deployment = deployment_of(example)
    args = parse_sim(sim_args(deployment, time_scale=10))  # the sim's own parser accepts them
    for key, value in expected.items():
        assert getattr(args, key) == value, (key, getattr(args, key))
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    argv = [*container.get("command", []), *container.get("args", [])]
    seqs = "--max-num-seqs" if args.engine == "vllm" else "--max-running-requests"
    assert args.max_num_seqs == int(argv[argv.index(seqs) + 1])


def test_engine_deployment_reads_replicas_labels_and_owner() -> None:
    deployment = deployment_of("llama-3.1-8b-l4-autoscale.yaml")
    deployment["metadata"].update(uid="u-1", generation=3)
    deployment["spec"]["replicas"] = 3
    engine = engine_deployment(deployment, 1.0)
    assert engine is not None
    assert (engine.llmservice, engine.replicas, engine.generation) == ("llama-3-1-8b-chat", 3, 3)
    pod = pod_manifest(engine, "p-0", 1234)
    assert pod["metadata"]["labels"]["tokenfleet.dev/llmservice"] == "llama-3-1-8b-chat"
    assert pod["metadata"]["ownerReferences"][0]["uid"] == "u-1"
    assert pod["status"]["conditions"] == [
        {"type": "ContainersReady", "status": "False"},
        {"type": "Ready", "status": "False"},
    ]
    # Whoever calls the engine finds the sim's port under the engine port's name.
    assert pod["spec"]["containers"][0]["ports"] == [
        {"name": "http", "containerPort": 1234, "protocol": "TCP"}
    ]


def test_a_deployment_without_our_label_is_not_an_engine() -> None:
    deployment = deployment_of("llama-3.1-8b-l4-autoscale.yaml")
    deployment["metadata"]["labels"] = {}
    assert engine_deployment(deployment, 1.0) is None


def test_the_endpoint_pickers_deployment_is_not_an_engine() -> None:
    """spec.routing's picker carries the LLMService's label on the Deployment (so prune
    finds it) but not on its pods: the kubelet runs no simulator for it."""
    path = EXAMPLES / "llama-3.1-8b-l4-scale-to-zero.yaml"
    (rendered,) = render_documents(load_documents(str(path)), str(path))
    deployments = [m for m in rendered.manifests if m["kind"] == "Deployment"]
    engines = [d["metadata"]["name"] for d in deployments if engine_deployment(d, 1.0)]
    assert len(deployments) == 2 and engines == ["llama-3-1-8b-zero"]


def test_a_deployment_without_a_plan_says_which_annotation_is_missing() -> None:
    deployment = deployment_of("llama-3.1-8b-l4-autoscale.yaml")
    deployment["metadata"]["annotations"] = {}
    with pytest.raises(PodSpecError, match=r"tokenfleet\.dev/plan"):
        sim_args(deployment)


def test_targets_carry_the_podmonitor_labels() -> None:
    assert target_group("127.0.0.1:9", "svc", "ns", "svc-0") == {
        "targets": ["127.0.0.1:9"],
        "labels": {"llmservice": "svc", "namespace": "ns", "pod": "svc-0"},
    }


@pytest.mark.parametrize(
    ("pod", "cost"),
    [
        (None, 0),
        ({"metadata": {}}, 0),
        ({"metadata": {"annotations": {"controller.kubernetes.io/pod-deletion-cost": "7"}}}, 7),
        ({"metadata": {"annotations": {"controller.kubernetes.io/pod-deletion-cost": "x"}}}, 0),
    ],
)
def test_deletion_cost(pod: dict[str, Any] | None, cost: int) -> None:
    assert deletion_cost(pod) == cost


def test_deployment_status_counts_unavailable() -> None:
    assert deployment_status(3, 1, 3, 2) == {
        "observedGeneration": 2,
        "replicas": 3,
        "updatedReplicas": 3,
        "readyReplicas": 1,
        "availableReplicas": 1,
        "unavailableReplicas": 2,
    }


@pytest.mark.parametrize(
    ("t", "rate"),
    [(0, 1.0), (99, 1.0), (100, 1.0), (150, 2.0), (200, 3.0), (399, 3.0), (400, 1.0), (999, 1.0)],
)
def test_schedule_ramps_up_then_steps_down(t: float, rate: float) -> None:
    schedule = Schedule((100, 300, 600), 100, low=1.0, high=3.0)
    assert schedule.rate(t) == pytest.approx(rate)
    assert schedule.end == 1000


@pytest.mark.parametrize(
    ("buckets", "bound", "share"),
    [
        ({0.5: 5.0, 1.0: 9.0, float("inf"): 10.0}, 1.0, 0.9),  # exact at a boundary
        ({0.5: 5.0, 1.0: 9.0, float("inf"): 10.0}, 0.8, 0.5),  # the boundary below
        ({0.5: 5.0, float("inf"): 10.0}, 0.1, 0.0),
        ({0.5: 0.0, float("inf"): 0.0}, 1.0, None),  # no traffic: no value, not 0
        ({}, 1.0, None),
    ],
)
def test_fraction_within(buckets: dict[float, float], bound: float, share: float | None) -> None:
    assert _fraction_within(buckets, bound) == share


def test_row_line_marks_a_breach_and_shows_the_hold() -> None:
    slo = Slo(ttft_s=1.0, tpot_s=0.1, quantile=0.95, attainment=0.99)
    row = Row(120, 1.5, 3, 2, 3, 1.2, 0.9, 1.35, "hold: PrometheusDown: holding", "PrometheusDown")
    line = row_line(row, slo)
    assert "2/3" in line and "1200!" in line
    assert line.count("PrometheusDown") == 1, line  # not "[PrometheusDown] hold: PrometheusDown"
    other = Row(120, 1.5, 3, 2, 3, 1.2, 0.9, 1.35, "cooling down", "Cooldown")
    assert "[Cooldown] cooling down" in row_line(other, slo)


def test_row_line_keeps_the_whole_decision() -> None:
    """No cut at the terminal's width: "attainment 0.988" must not read "attainment 0"."""
    slo = Slo(ttft_s=1.0, tpot_s=0.1, quantile=0.95, attainment=0.99)
    reason = "slo: attainment 0.988 < 0.99 over 60 s; " + "x" * 200
    row = Row(120, 1.5, 3, 2, 3, 0.8, 0.9, 1.35, reason, None)
    assert row_line(row, slo).endswith(reason)


def test_plan_header_says_the_ttft_quantile_is_bucket_interpolation() -> None:
    slo = Slo(ttft_s=1.0, tpot_s=0.1, quantile=0.95, attainment=0.99)
    header = "\n".join(plan_header("x", {"spec": {}, "status": {"plan": {}}}, slo, 10.0))
    assert "TTFT-Q" in header and "interpolation" in header and "p95" in header


def test_lora_flags_reach_the_simulator_in_its_words() -> None:
    from tokenfleet.localfleet.pods import lora_sim_args

    vllm_argv = ["vllm", "serve", "m", "--enable-lora", "--max-loras", "4", "--max-lora-rank",
                 "16", "--lora-modules", "a=/x/a", "b=/x/b", "--port", "8000"]  # fmt: skip
    assert lora_sim_args("vllm", vllm_argv) == [
        "--enable-lora", "--max-loras", "4", "--max-lora-rank", "16",
        "--lora-modules", "a=/x/a", "b=/x/b",
    ]  # fmt: skip
    pinned = '{"lora_name":"a","lora_path":"/x/a","pinned":true}'
    sglang_argv = ["--enable-lora", "--max-loras-per-batch", "5", "--lora-paths", pinned, "b=/x/b"]
    # SGLang counts the base model's slot: 5 per batch is 4 adapters.
    assert lora_sim_args("sglang", sglang_argv) == [
        "--enable-lora", "--max-loras", "4", "--lora-modules", "a=/x/a", "b=/x/b"
    ]  # fmt: skip


def test_a_gated_pod_carries_its_gates_and_the_engines_literal_env() -> None:
    deployment = deployment_of("llama-3.1-8b-lora-adapters.yaml")
    engine = engine_deployment(deployment, 1.0)
    assert engine is not None
    assert engine.readiness_gates == ("tokenfleet.dev/adapters-loaded",)
    assert ("VLLM_ALLOW_RUNTIME_LORA_UPDATING", "True") in engine.env
    assert "--enable-lora" in engine.sim_args
    pod = pod_manifest(engine, "p-0", 1234)
    assert pod["spec"]["readinessGates"] == [{"conditionType": "tokenfleet.dev/adapters-loaded"}]
