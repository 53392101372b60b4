"""Every configuration of the silicon files that the planner can model plans: none that ran
(on H100, H200 or B200, with vLLM or SGLang) is refused as "does not fit". A configuration
is planned at its longest request (the memory check depends on the context, not on the
concurrency or the output length's split)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tokenfleet.calibration.silicon import SiliconRow, parse, resolve
from tokenfleet.calibration.silicon_bench import _plan
from tokenfleet.capacity.errors import PlanError

DATA = Path(__file__).resolve().parents[2] / "data"


@pytest.mark.slow  # plans every configuration of both files (1-2 s)
@pytest.mark.parametrize("name", ["silicon-h100.csv", "silicon-test.csv"])
def test_no_configuration_that_ran_is_refused(name: str) -> None:
    longest: dict[tuple[object, ...], SiliconRow] = {}
    for row in parse((DATA / name).read_text()):
        key = (row.model, row.system, row.gemm_quant, row.engine, row.version, row.tp,
               row.pp, row.moe_tp, row.moe_ep, row.attention_dp)  # fmt: skip
        if key not in longest or row.isl + row.osl > longest[key].isl + longest[key].osl:
            longest[key] = row
    refused = []
    planned = 0
    for row in longest.values():
        r = resolve(row)
        if isinstance(r, str):
            continue  # outside the catalog or a format not modelled: listed by calibrate
        try:
            _plan(row, r)
            planned += 1
        except PlanError as e:
            refused.append(f"{row.model} TP {row.tp} PP {row.pp} {row.engine}: {e}")
    assert planned > 20
    assert not refused, "\n".join(refused[:10])
