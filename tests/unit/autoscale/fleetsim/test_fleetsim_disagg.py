"""`autoscale-sim --serving disaggregated`: the trace on a prefill fleet and a decode fleet
joined by the KV transfer, each pool scaled by the operator's rules."""

from __future__ import annotations

import pytest

from tokenfleet.autoscale.fleetsim.disagg import PD_NAME, prepare_disaggregated, run_disaggregated
from tokenfleet.autoscale.fleetsim.run import SimOptions, prepare
from tokenfleet.autoscale.fleetsim.traces import load

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def replay():  # type: ignore[no-untyped-def]
    setup = prepare(load("steady", 0), SimOptions())
    d = prepare_disaggregated(setup)
    return setup, d, run_disaggregated(setup, d)


def test_every_request_is_judged_on_the_whole_path(replay) -> None:  # type: ignore[no-untyped-def]
    setup, _, result = replay
    assert result.name == PD_NAME and result.requests == len(setup.trace.requests)
    assert 0 < result.good <= result.ttft_good <= result.requests
    assert len(result.missed_at) == result.requests - result.good


def test_both_pools_cost_gpu_hours_and_move(replay) -> None:  # type: ignore[no-untyped-def]
    setup, d, result = replay
    minutes = setup.trace.duration / 3600
    floor = (d.prefill.gpus + d.decode.gpus) * minutes  # at least one replica of each, all along
    assert result.gpu_hours >= floor * 0.99
    assert result.timeline and all(p.desired >= 2 for p in result.timeline)


def test_a_slower_link_delays_first_tokens() -> None:
    setup = prepare(load("steady", 0), SimOptions())
    fast = prepare_disaggregated(setup)
    slow = prepare_disaggregated(setup, network_gbit=1.0)
    assert slow.pair.transfer_ms > 10 * fast.pair.transfer_ms


def test_compare_prints_both_fleets(capsys: pytest.CaptureFixture[str]) -> None:
    import json

    from tokenfleet.cli import main

    argv = ["autoscale-sim", "--trace", "steady", "--serving", "compare", "--no-frontier"]
    assert main([*argv, "-o", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert set(doc["policies"]) == {"tokenfleet", PD_NAME}
    for row in doc["policies"].values():
        assert 0 <= row["sloAttainment"] <= 1 and row["gpuHours"] > 0
    assert doc["disaggregated"].startswith("disaggregated: ")
