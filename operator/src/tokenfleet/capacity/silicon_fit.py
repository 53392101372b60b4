"""Fit the client-overhead table (capacity/overheads.py) on measured H100 rows.

The calibration rows are split by a hash of their id: two thirds fit, one third held out
(`part`). Per engine, each fit row's benchmark is simulated once without client overhead;
the overhead (fixed + per prompt token) then adds to its mean TTFT, and a grid search picks
the pair with the smallest mean |log(predicted / measured)| over the fit rows. Nothing else
is fitted here; the test GPUs' rows never enter.
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from tokenfleet.capacity.errors import PlanError
from tokenfleet.capacity.overheads import ClientOverhead
from tokenfleet.capacity.silicon import SiliconRow, resolve
from tokenfleet.capacity.silicon_bench import _plan, simulate

Part = Literal["fit", "held-out"]
FIXED_GRID_S = [i * 0.0025 for i in range(41)]  # 0-100 ms
PER_TOKEN_GRID_S = [i * 2.5e-6 for i in range(41)]  # 0-100 us per prompt token


def part(row: SiliconRow) -> Part:
    return "held-out" if zlib.crc32(row.id.encode()) % 3 == 0 else "fit"


@dataclass(frozen=True)
class FitRow:
    row: SiliconRow
    ttft_engine_s: float  # the benchmark's mean TTFT without client overhead


def simulated(rows: Sequence[SiliconRow]) -> list[FitRow]:
    out = []
    for row in rows:
        r = resolve(row)
        if isinstance(r, str):
            continue
        try:
            p = _plan(row, r)
        except PlanError:
            continue
        out.append(FitRow(row, simulate(row, p, 0.0).ttft_s))
    return out


def _loss(rows: Sequence[FitRow], fixed: float, per_token: float) -> float:
    return sum(
        abs(math.log((f.ttft_engine_s + fixed + per_token * f.row.isl) * 1e3 / f.row.ttft_ms))
        for f in rows
    ) / max(len(rows), 1)


def fit(rows: Sequence[SiliconRow]) -> dict[str, ClientOverhead]:
    """The overhead per engine fitted on the `fit` part of `rows`."""
    sims = simulated([r for r in rows if part(r) == "fit"])
    table = {}
    for engine in sorted({f.row.engine for f in sims}):
        mine = [f for f in sims if f.row.engine == engine]
        best = min(
            ((a, k) for a in FIXED_GRID_S for k in PER_TOKEN_GRID_S),
            key=lambda ak: _loss(mine, ak[0], ak[1]),
        )
        table[engine] = ClientOverhead(best[0], best[1], f"fit on {len(mine)} rows")
    return table
