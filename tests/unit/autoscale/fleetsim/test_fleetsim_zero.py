"""`tokenfleet autoscale-sim --min-replicas 0`: the offline fleet gains the operator's
scale-to-zero rules (the requests that arrive at zero wait in the picker's queue)."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from tokenfleet.autoscale.fleetsim.run import SimOptions, make_autoscaler, prepare, run_policy
from tokenfleet.autoscale.fleetsim.traces import load_csv
from tokenfleet.cli import main


@pytest.fixture(scope="module")
def gap_csv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two 5-minute bursts of 1 req/s with 30 idle minutes between them."""
    rng = random.Random(11)
    rows = ["TIMESTAMP,ContextTokens,GeneratedTokens"]
    for start in (0.0, 2100.0):
        t = start
        while t < start + 300:
            t += rng.expovariate(1.0)
            rows.append(f"{t:.3f},{rng.randint(200, 1000)},{rng.randint(20, 200)}")
    path = tmp_path_factory.mktemp("trace") / "gap.csv"
    path.write_text("\n".join(rows) + "\n")
    return path


@pytest.mark.slow
def test_zero_in_the_gap_and_back_for_the_second_burst(gap_csv: Path) -> None:
    options = SimOptions.of(min_replicas=0, scale_to_zero_after=300, cold_start=120)
    setup = prepare(load_csv(gap_csv), options)
    assert setup.spec.routing.enabled and setup.spec.autoscaling.min_replicas == 0
    result = run_policy(setup, make_autoscaler("tokenfleet", setup))
    desired = [(p.at, p.desired) for p in result.timeline]
    in_gap = [d for at, d in desired if 300 + 300 + 60 < at < 2100]
    assert in_gap and max(in_gap) == 0  # idle window (+ the rate window) after the burst
    # Up again within the second burst, and most requests served within the SLO.
    assert max(d for at, d in desired if 2100 < at < 2400) >= 1
    assert result.good > 0.5 * result.requests


@pytest.mark.slow
def test_cli_compares_zero_with_one(capsys: pytest.CaptureFixture[str], gap_csv: Path) -> None:
    rows = {}
    for floor in ("0", "1"):
        argv = ["autoscale-sim", "--trace", str(gap_csv), "--policy", "tokenfleet", "--no-frontier"]
        assert (
            main([*argv, "--min-replicas", floor, "--scale-to-zero-after", "300", "-o", "json"])
            == 0
        )
        rows[floor] = json.loads(capsys.readouterr().out)["policies"]["tokenfleet"]
    # Zero releases the GPU for most of the 30-minute gap; the first requests of the second
    # burst pay a cold start (fewer of them meet the TTFT SLO).
    assert rows["0"]["gpuHours"] < 0.75 * rows["1"]["gpuHours"]
    assert rows["0"]["sloAttainment"] <= rows["1"]["sloAttainment"]


def test_negative_min_replicas_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["autoscale-sim", "--trace", "steady", "--min-replicas", "-1"]) == 2
    assert "--min-replicas" in capsys.readouterr().err
