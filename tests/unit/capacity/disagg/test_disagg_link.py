"""The KV transfer's rules: it grows with the prompt, falls with the link's speed, and moves
the larger of the two ranks' shares."""

from __future__ import annotations

import pytest

from tokenfleet.capacity import PlanError, get_gpu
from tokenfleet.capacity.disagg.link import HANDOFF_S, kv_link, transfer_seconds

LLAMA_8B_TP1 = 131_072  # KV bytes per token on one rank: 2 x 32 layers x 8 heads x 128 x 2 B


def test_transfer_grows_with_the_prompt() -> None:
    link = kv_link(get_gpu("h100-sxm"))
    prompts = (0, 1_000, 4_000, 32_000)
    times = [transfer_seconds(n, LLAMA_8B_TP1, LLAMA_8B_TP1, link) for n in prompts]
    assert times == sorted(times) and len(set(times)) == len(times)
    assert times[0] == HANDOFF_S
    # Linear in the prompt beyond the fixed hand-off.
    assert times[3] - HANDOFF_S == pytest.approx(8 * (times[2] - HANDOFF_S))


def test_transfer_falls_with_link_speed() -> None:
    gpu = get_gpu("h100-sxm")
    rates = (25.0, 100.0, 400.0, 800.0)  # Gb/s per GPU
    times = [
        transfer_seconds(4_000, LLAMA_8B_TP1, LLAMA_8B_TP1, kv_link(gpu, "network", g))
        for g in rates
    ]
    assert times == sorted(times, reverse=True)
    assert times[0] - HANDOFF_S == pytest.approx(4 * (times[1] - HANDOFF_S))
    # NVLink inside a node is faster than the catalog's NIC.
    nvlink = transfer_seconds(4_000, LLAMA_8B_TP1, LLAMA_8B_TP1, kv_link(gpu, "nvlink"))
    network = transfer_seconds(4_000, LLAMA_8B_TP1, LLAMA_8B_TP1, kv_link(gpu))
    assert nvlink < network


def test_the_larger_rank_share_sets_the_time() -> None:
    """Decode TP above prefill TP: one prefill rank's link carries its whole share; below
    it, one decode rank reads its (larger) share from several prefill ranks."""
    link = kv_link(get_gpu("h100-sxm"))
    tp1, tp2 = LLAMA_8B_TP1, LLAMA_8B_TP1 // 2
    assert transfer_seconds(4_000, tp1, tp2, link) == transfer_seconds(4_000, tp2, tp1, link)
    assert transfer_seconds(4_000, tp2, tp2, link) < transfer_seconds(4_000, tp1, tp2, link)


def test_catalog_nic_is_the_default_network() -> None:
    gpu = get_gpu("h200")
    link = kv_link(gpu)
    assert link.gbps == gpu.internode_gbps and link.source.startswith("catalog")
    assert kv_link(gpu, "network", 100).gbps == pytest.approx(12.5)


@pytest.mark.parametrize(
    ("kind", "gbit", "field"),
    [("network", 0.0, "kv-network-gbps"), ("nvlink", 100.0, "kv-network-gbps"),
     ("infiniband", None, "kv-link")],
)  # fmt: skip
def test_bad_link_is_refused_with_the_fix(kind: str, gbit: float | None, field: str) -> None:
    with pytest.raises(PlanError) as e:
        kv_link(get_gpu("h100-sxm"), kind, gbit)  # type: ignore[arg-type]
    assert e.value.field == field and e.value.fix
