"""capacity.overlay: the cluster's GPU prices and labels over the built-in catalog."""

from __future__ import annotations

from typing import Any

import pytest

from tokenfleet.capacity import PlanError
from tokenfleet.capacity.gpus import GPUS
from tokenfleet.capacity.overlay import apply_overlay, parse_overlay
from tokenfleet.cli import main


def test_overlay_changes_only_the_named_fields() -> None:
    out = parse_overlay({"gpus": {"h100-sxm": {"pricePerHour": 2.49, "gpusPerNode": 4}}})
    gpu = out["h100-sxm"]
    assert (gpu.price_per_hour, gpu.gpus_per_node) == (2.49, 4)
    assert gpu.memory_gib == GPUS["h100-sxm"].memory_gib
    assert GPUS["h100-sxm"].price_per_hour != 2.49  # parse does not touch the catalog


@pytest.mark.parametrize(
    ("data", "needle"),
    [
        ([], "expected a mapping with one key"),
        ({"gpus": {"rtx-9090": {}}}, "not a GPU type of the catalog"),
        ({"gpus": {"l4": {"price": 1}}}, "gpus.l4.price=1: unknown field"),
        ({"gpus": {"l4": {"pricePerHour": -1}}}, "gpus.l4.pricePerHour=-1: must be positive"),
        ({"gpus": {"l4": {"memoryGib": "big"}}}, "must be a number"),
        ({"gpus": {"l4": {"nodeLabelValue": ""}}}, "non-empty string"),
    ],
)
def test_bad_overlay_names_the_field(data: Any, needle: str) -> None:
    with pytest.raises(PlanError) as caught:
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
