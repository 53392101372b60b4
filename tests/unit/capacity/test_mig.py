"""MIG profiles as catalog types (capacity/mig.py): memory, compute share, resource names."""

from __future__ import annotations

import pytest

from tokenfleet.capacity.gpus import GPUS, get_gpu
from tokenfleet.capacity.mig import PROFILES
from tokenfleet.capacity.overlay import apply_overlay


@pytest.mark.parametrize(
    ("gpu_id", "memory", "bandwidth_share", "compute_share", "resource", "instances"),
    [
        ("a100-80gb-mig-1g.10gb", 9.50, 1 / 8, 14 / 108, "nvidia.com/mig-1g.10gb", 7),
        ("a100-80gb-mig-3g.40gb", 39.25, 4 / 8, 42 / 108, "nvidia.com/mig-3g.40gb", 2),
        ("h100-sxm-mig-1g.20gb", 19.62, 2 / 8, 26 / 132, "nvidia.com/mig-1g.20gb", 4),
        ("h100-sxm-mig-3g.40gb", 39.50, 4 / 8, 60 / 132, "nvidia.com/mig-3g.40gb", 2),
        ("h100-sxm-mig-7g.80gb", 79.19, 1.0, 1.0, "nvidia.com/mig-7g.80gb", 1),
    ],
)  # fmt: skip
def test_a_slice_has_its_share_of_the_gpu(
    gpu_id: str,
    memory: float,
    bandwidth_share: float,
    compute_share: float,
    resource: str,
    instances: int,
) -> None:
    g = get_gpu(gpu_id)
    parent = GPUS[str(g.parent)]
    assert g.memory_gib == memory
    assert g.bandwidth_gbps == pytest.approx(parent.bandwidth_gbps * bandwidth_share, abs=0.1)
    assert g.bf16_tflops == pytest.approx(parent.bf16_tflops * compute_share, abs=0.1)
    assert g.resource_name == resource
    assert g.price_per_hour == pytest.approx(parent.price_per_hour / instances, abs=1e-4)
    assert (g.gpus_per_node, g.base_id, g.node_label_value) == (
        1,
        parent.id,
        parent.node_label_value,
    )


def test_every_profile_fits_the_gpu_it_is_cut_from() -> None:
    for parent_id, (sms, profiles) in PROFILES.items():
        whole = GPUS[parent_id]
        for p in profiles:
            assert p.sms <= sms and GPUS[f"{parent_id}-mig-{p.name}"].memory_gib <= whole.memory_gib
            assert p.instances * p.memory_slices <= 8  # eight memory slices per GPU


def test_an_overlay_price_reaches_the_slices(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("tokenfleet.capacity.overlay.GPUS", dict(GPUS))
    from tokenfleet.capacity import overlay

    apply_overlay({"gpus": {"h100-sxm": {"pricePerHour": 2.0},
                            "h100-sxm-mig-1g.10gb": {"pricePerHour": 0.1}}})  # fmt: skip
    assert overlay.GPUS["h100-sxm-mig-3g.40gb"].price_per_hour == 1.0
    assert overlay.GPUS["h100-sxm-mig-1g.10gb"].price_per_hour == 0.1  # named: kept
    assert GPUS["h100-sxm"].price_per_hour == 3.5  # the process catalog untouched
