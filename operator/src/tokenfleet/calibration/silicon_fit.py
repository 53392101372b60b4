"""Fit the client-overhead table (capacity/overheads.py) on measured H100 rows.

The calibration rows are split by a hash of their id: two thirds fit, one third held out
(`part`). Per engine, each fit row's benchmark is simulated once without client overhead
(for vLLM its two phases, the start burst and the steady loop); the overhead (fixed + per
prompt token) then adds to its mean TTFT, and a grid search picks the triple (fixed, per
token, and for vLLM the burst's rounds) with the smallest mean |log(predicted / measured)|
over the fit rows. An engine with no row at concurrency LOW_CONCURRENCY or below (SGLang's
H100 rows start at 16) takes vLLM's triple. Nothing else is fitted here; the test GPUs'
rows never enter.
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Literal

from tokenfleet.calibration.silicon import SiliconRow, resolve
from tokenfleet.calibration.silicon_bench import _plan, phases
from tokenfleet.calibration.silicon_harness import DEFAULT, Harness
from tokenfleet.capacity.benchmark import Phases
from tokenfleet.capacity.engine_profiles import engine_facts
from tokenfleet.capacity.overheads import ClientOverhead
from tokenfleet.errors import UserError
from tokenfleet.scheduling.virtual import mean_of_rounds

Part = Literal["fit", "held-out"]
FIXED_GRID_S = [i * 0.0025 for i in range(41)]  # 0-100 ms
PER_TOKEN_GRID_S = [i * 2.5e-6 for i in range(41)]  # 0-100 us per prompt token
BURST_ROUNDS_GRID = [1, 2, 3, 4, 5, 6, 8, 10, 12, 15, 20]  # 20: the benchmark's own rounds
# An engine whose rows all run above this concurrency cannot separate a per-request time
# from queueing: it takes vLLM's fit (capacity/overheads.py).
LOW_CONCURRENCY = 4


def part(row: SiliconRow) -> Part:
    return "held-out" if zlib.crc32(row.id.encode()) % 3 == 0 else "fit"


@dataclass(frozen=True)
class FitRow:
    row: SiliconRow
    # The benchmark's mean TTFT without client overhead: the start burst's and the steady
    # loop's (equal where the benchmark is simulated whole, SGLang).
    first_s: float
    later_s: float

    def ttft_engine_s(self, burst_rounds: int) -> float:
        return mean_of_rounds(self.first_s, self.later_s, burst_rounds)


def simulated(rows: Sequence[SiliconRow], harness: Harness = DEFAULT) -> list[FitRow]:
    out = []
    for row in rows:
        r = resolve(row)
        if isinstance(r, str):
            continue
        try:
            p = _plan(row, r)
        except UserError:
            continue
        run = phases(row, p, 0.0, harness)
        if isinstance(run, Phases):
            out.append(FitRow(row, run.first.ttft_s, run.later.ttft_s))
        else:
            out.append(FitRow(row, run.ttft_s, run.ttft_s))
    return out


def _loss(rows: Sequence[FitRow], fixed: float, per_token: float, burst_rounds: int) -> float:
    return sum(
        abs(
            math.log(
                (f.ttft_engine_s(burst_rounds) + fixed + per_token * f.row.isl)
                * 1e3
                / f.row.ttft_ms
            )
        )
        for f in rows
    ) / max(len(rows), 1)


def fit(rows: Sequence[SiliconRow], harness: Harness = DEFAULT) -> dict[str, ClientOverhead]:
    """The overhead per engine fitted on the `fit` part of `rows`, run under `harness`."""
    sims = simulated([r for r in rows if part(r) == "fit"], harness)
    table: dict[str, ClientOverhead] = {}
    # vLLM first: its rows fit the start burst's weight of a mixed schedule, which the SGLang
    # rows launched with --enable-mixed-chunk (calibration/silicon_harness.py) then take; the
    # rest of SGLang's are simulated whole and do not use it.
    for engine in sorted(
        {f.row.engine for f in sims}, key=lambda e: not engine_facts(e).mixed_prefill
    ):
        mine = [f for f in sims if f.row.engine == engine]
        vllm = table.get("vllm")
        if vllm is not None and min(f.row.concurrency for f in mine) > LOW_CONCURRENCY:
            # No row near an idle server: the per-request time is the client's, which
            # vLLM's low-concurrency rows identify (capacity/overheads.py).
            table[engine] = replace(vllm, source=f"vLLM's ({len(mine)} rows, none at low load)")
            continue
        bursts = (
            BURST_ROUNDS_GRID
            if engine_facts(engine).mixed_prefill
            else [vllm.burst_rounds if vllm else 20]
        )
        # Ties go to the first in grid order: the smallest overhead, the fewest rounds.
        best = min(
            ((a, k, n) for n in bursts for a in FIXED_GRID_S for k in PER_TOKEN_GRID_S),
            key=lambda akn: _loss(mine, *akn),
        )
        table[engine] = ClientOverhead(
            best[0], best[1], f"fit on {len(mine)} rows", burst_rounds=best[2]
        )
    return table
