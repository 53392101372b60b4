"""capacity.overlay: the cluster's GPU prices and labels over the built-in catalog."""

from __future__ import annotations

from typing import Any

import pytest

from tests.support.gpu_overlay import NEW_GPU
from tokenfleet.capacity.gpus import GPUS
from tokenfleet.capacity.overlay import apply_overlay, parse_overlay
from tokenfleet.cli import main
from tokenfleet.errors import UserError


def test_overlay_changes_only_the_named_fields() -> None:
    out = parse_overlay({"gpus": {"h100-sxm": {"pricePerHour": 2.49, "gpusPerNode": 4}}})
    gpu = out["h100-sxm"]
    assert (gpu.price_per_hour, gpu.gpus_per_node) == (2.49, 4)
    assert gpu.memory_gib == GPUS["h100-sxm"].memory_gib
    assert GPUS["h100-sxm"].price_per_hour != 2.49  # parse does not touch the catalog


@pytest.mark.parametrize(
    ("data", "needle"),
    [
        ([], "expected a mapping of gpus and offers"),
        ({"offers": [{"type": "h100"}]}, "offers[0].type=h100: is not a GPU type of the catalog"),
        ({"offers": [{"type": "l4"}, {"type": "l4"}]}, "offers[1].type=l4: is offered twice"),
        ({"offers": [{"type": "l4", "maxCount": 0}]}, "offers[0].maxCount=0: must be a whole"),
        ({"offers": [{"type": "l4", "price": 1}]}, "expected a mapping of type, pricePerHour"),
        ({"gpus": {"rtx-9090": {"pricePerHour": 1}}}, "add name, memoryGib, bandwidthGbps"),
        ({"gpus": {"RTX_9090": {}}}, "not a valid GPU id"),
        ({"gpus": {"l4": {"price": 1}}}, "gpus.l4.price=1: unknown field"),
        ({"gpus": {"l4": {"pricePerHour": -1}}}, "gpus.l4.pricePerHour=-1: must be positive"),
        ({"gpus": {"l4": {"memoryGib": "big"}}}, "must be a number"),
        ({"gpus": {"l4": {"nodeLabelValue": ""}}}, "non-empty string"),
    ],
)
def test_bad_overlay_names_the_field(data: Any, needle: str) -> None:
    with pytest.raises(UserError) as caught:
        parse_overlay(data)
    assert needle in str(caught.value)


def test_apply_overlay_reaches_the_planner(monkeypatch: pytest.MonkeyPatch) -> None:
    from tokenfleet.capacity.gpus import get_gpu

    monkeypatch.setitem(GPUS, "l4", GPUS["l4"])  # restored after the test
    assert apply_overlay({"gpus": {"l4": {"pricePerHour": 0.5}}}) == ["l4"]
    assert get_gpu("l4").price_per_hour == 0.5


def test_operator_refuses_a_bad_overlay_before_starting(
    tmp_path: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "catalog.yaml"
    path.write_text("gpus:\n  l4: {pricePerHour: -1}\n")
    assert main(["operator", "--standalone", "--gpu-catalog", str(path)]) == 2
    assert "gpus.l4.pricePerHour=-1" in capsys.readouterr().err
    assert main(["operator", "--standalone", "--engine-image", "vllm"]) == 2
    assert "--engine-image" in capsys.readouterr().err


def test_a_new_gpu_type_is_planned_and_parsed_after_the_overlay(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from tokenfleet.api import SpecError, parse_llmservice, to_plan_request
    from tokenfleet.capacity import plan

    body = {
        "apiVersion": "tokenfleet.dev/v1alpha1",
        "kind": "LLMService",
        "metadata": {"name": "m", "namespace": "ns"},
        "spec": {"model": {"id": "meta-llama/Llama-3.1-8B"}, "gpu": {"type": "rtx-pro-6000"}},
    }
    with pytest.raises(SpecError, match="use one of"):
        parse_llmservice(body)  # unknown to the built-in catalog
    monkeypatch.setattr("tokenfleet.capacity.gpus.GPUS", dict(GPUS))  # restored after
    from tokenfleet.capacity import gpus

    gpus.GPUS.update(parse_overlay({"gpus": {"rtx-pro-6000": NEW_GPU}}, gpus.GPUS))
    service = parse_llmservice(body)
    result = plan(to_plan_request(service))
    assert result.gpu.id == "rtx-pro-6000"
    assert result.gpu.resource_name == "nvidia.com/gpu"  # the default vendor
    assert result.gpus_per_replica == 1
    from tokenfleet import render

    (deployment,) = [m for m in render.all(service, result) if m["kind"] == "Deployment"]
    pod = deployment["spec"]["template"]["spec"]
    assert pod["nodeSelector"]["nvidia.com/gpu.product"] == NEW_GPU["nodeLabelValue"]
    assert pod["containers"][0]["image"].startswith("vllm/vllm-openai:v")


def test_offers_are_what_type_auto_chooses_from(monkeypatch: pytest.MonkeyPatch) -> None:
    from tokenfleet.capacity import gpu_choice, overlay

    monkeypatch.setattr(overlay, "GPUS", dict(GPUS))
    offers: list[gpu_choice.GpuCandidate] = []
    monkeypatch.setattr(overlay, "OFFERS", offers)
    apply_overlay({"gpus": {"l40s": {"pricePerHour": 1.2}},
                   "offers": [{"type": "h100-sxm", "pricePerHour": 2.49, "maxCount": 16},
                              {"type": "l40s"}]})  # fmt: skip
    assert [(o.gpu.id, o.gpu.price_per_hour, o.max_count) for o in offers] == [
        ("h100-sxm", 2.49, 16),
        ("l40s", 1.2, None),  # the overlay's price for the type
    ]
