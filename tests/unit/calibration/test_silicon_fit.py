"""The client-overhead table is what its fit on the H100 calibration split gives, and the
model holds on the H100 rows it was not fitted to.

tests/data/silicon-h100.csv is a copy of the shared reference silicon-h100.csv (the
calibration set). The test set (silicon-test.csv) is never read here.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tokenfleet.calibration.silicon import Scored, errors, parse, resolve
from tokenfleet.calibration.silicon_bench import _plan, predict_row, simulate
from tokenfleet.calibration.silicon_fit import fit, part
from tokenfleet.capacity.overheads import OVERHEADS

H100 = Path(__file__).parents[2] / "data" / "silicon-h100.csv"


@pytest.fixture(scope="module")
def rows():
    return parse(H100.read_text())


def test_the_split_is_deterministic_and_holds_out_a_third(rows) -> None:
    parts = [part(r) for r in rows]
    assert parts == [part(r) for r in rows]
    held = parts.count("held-out") / len(parts)
    assert 0.25 < held < 0.42


@pytest.mark.slow
def test_the_overhead_table_is_the_fit_on_the_fit_split(rows) -> None:
    fitted = fit(rows)
    for engine in ("vllm", "sglang"):
        assert fitted[engine].fixed_s == pytest.approx(OVERHEADS[engine].fixed_s)
        assert fitted[engine].per_prompt_token_s == pytest.approx(
            OVERHEADS[engine].per_prompt_token_s
        )
        assert fitted[engine].burst_rounds == OVERHEADS[engine].burst_rounds


def test_the_start_burst_weighs_on_vllms_mean_ttft(rows) -> None:
    # The fewer rounds the burst is spread over, the more its queueing shows in the mean.
    row = next(r for r in rows if r.engine == "vllm" and r.concurrency >= 32)
    p = _plan(row, resolve(row))  # type: ignore[arg-type]
    short, long_ = simulate(row, p, 0.0, burst_rounds=2), simulate(row, p, 0.0, burst_rounds=20)
    assert short.ttft_s > long_.ttft_s


@pytest.mark.slow
def test_the_held_out_h100_rows_stay_predicted(rows) -> None:
    scored = [s for r in rows if part(r) == "held-out" and isinstance(s := predict_row(r), Scored)]
    assert len(scored) >= 80
    ttft = errors(s.ttft_error for s in scored)
    tpot = errors(s.tpot_error for s in scored)
    assert ttft is not None and tpot is not None
    # Where the model stood when this was written: 15.1% and 8.1% median |error|.
    assert ttft.median < 0.20 and tpot.median < 0.12
    assert abs(ttft.bias) < 0.10 and abs(tpot.bias) < 0.10
