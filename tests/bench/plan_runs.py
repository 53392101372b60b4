"""Which virtual-time runs a cold plan() makes, per layout and purpose, and what a goodput
search that ran only the runs its answer rests on would save.

    python tests/bench/plan_runs.py            # the five cases of test_plan_latency.py
    python tests/bench/plan_runs.py all        # plan_cases.py's 220 cases, totals only

Every scheduler run (a cache miss of load.closed or load.open_) is counted once, under the
layout whose planning started it and its purpose:
- closed/target: the closed loop at the workload's concurrency (the prediction, the guess);
- closed/saturation: every slot busy (the saturation throughput, the search's bracket);
- closed/lone: a lone client (is the SLO met at all; the probes' lockstep factor);
- closed/prefix: the prefix-cache explanation, closed/warning: the lone-request warning;
- open/first: the goodput search's first run, run by the cost choice's order;
- open/search: the other goodput-search runs.

A run repeated with the same inputs within one plan() is counted as such (the caches on
load.closed / load.open_ share runs between the cost choice and the final plan).

`oracle`: the search's runs (open/search) that a search knowing where the capacity lies
would still make: the run at the rate it returns (its statistics are the prediction) and
the lowest rate above it that failed (it proves the capacity below); for a search stopped
at its floor, the lowest failing run at or above the floor. The rest is the most any
reordering of the same search (interpolation, a better bracket, reused probes) can save
without changing its answer. CPU times are process_time, noisy on a shared machine.
"""

from __future__ import annotations

import collections
import contextlib
import sys
import time
from dataclasses import dataclass, field
from types import FrameType
from typing import Any

from tokenfleet.capacity import PlanError, PlanRequest, get_gpu, load, load_model, plan

BENCH = [
    ("meta-llama/Llama-3.1-8B", "l4", {}),
    ("meta-llama/Llama-3.1-8B", "h100-sxm", {}),
    ("meta-llama/Llama-3.1-405B", "h100-sxm", {}),
    ("openai/gpt-oss-120b", "h100-sxm", {}),
    ("deepseek-ai/DeepSeek-V3", "h200", {}),
]


@dataclass
class Run:
    layout: str
    purpose: str
    ms: float
    inputs: str  # the scheduler run's every argument: two equal ones are one run twice
    rate: float = 0.0
    passed: bool = False
    search: int = -1  # which goodput_capacity call it belongs to


@dataclass
class Log:
    runs: list[Run] = field(default_factory=list)
    # per goodput_capacity call: (layout, floor, returned rate)
    searches: list[tuple[str, float, float]] = field(default_factory=list)


LOG = Log()


def _frame(name: str) -> FrameType | None:
    frame = sys._getframe(2)
    while frame is not None and frame.f_code.co_name != name:
        frame = frame.f_back  # type: ignore[assignment]
    return frame


def _layout() -> str:
    frame = sys._getframe(2)
    while frame is not None:
        if frame.f_code.co_name in ("_plan", "_saturation_cost"):
            req = frame.f_locals["req"]
            if req.tensor_parallel_size is None:
                return "min-gpus"  # plan()'s own choice: the fewest-GPUs rule
            return f"TP{req.tensor_parallel_size}xPP{req.pipeline_parallel_size}"
        frame = frame.f_back  # type: ignore[assignment]
    return "?"


def _closed_purpose() -> str:
    own = _frame("closed")
    start = _frame("search_start")
    if start is None:
        lone = own is not None and own.f_locals["concurrency"] == 1
        return "closed/warning" if lone else "closed/prefix"
    c = own.f_locals["concurrency"] if own else 0
    if c == start.f_locals["concurrency"]:
        return "closed/target"
    return "closed/lone" if c == 1 else "closed/saturation"


def _install() -> None:
    closed_loop, open_loop, capacity = load.closed_loop, load.open_loop, load.goodput_capacity

    def counted_closed(*args: Any, **kw: Any) -> Any:
        purpose, layout = _closed_purpose(), _layout()
        start = time.process_time()
        stats = closed_loop(*args, **kw)
        inputs = repr(("closed", args, sorted(kw.items())))
        LOG.runs.append(Run(layout, purpose, (time.process_time() - start) * 1e3, inputs))
        return stats

    def counted_open(config: Any, timer: Any, rate: float, *args: Any, **kw: Any) -> Any:
        first = _frame("first_probe_passes") is not None
        layout = _layout()
        start = time.process_time()
        stats = open_loop(config, timer, rate, *args, **kw)
        ms = (time.process_time() - start) * 1e3
        passed = not stats.saturated and stats.attainment >= load.GOODPUT_ATTAINMENT
        # open_loop sees the rate over the lockstep factor: take open_'s own
        own = _frame("open_")
        offered = own.f_locals["rate"] if own is not None else rate
        search = -1 if first else len(LOG.searches) - 1
        purpose = "open/first" if first else "open/search"
        # early_give_up (a decider's run) is left out: the same run told to stop sooner
        same = sorted((k, v) for k, v in kw.items() if k != "early_give_up")
        inputs = repr(("open", config, timer, rate, args, same))
        LOG.runs.append(Run(layout, purpose, ms, inputs, offered, passed, search))
        return stats

    def counted_capacity(*args: Any, **kw: Any) -> Any:
        layout = _layout()
        floor = kw.get("floor_rps", args[10] if len(args) > 10 else 0.0)
        index = len(LOG.searches)
        LOG.searches.append((layout, floor, -1.0))
        rate, best = capacity(*args, **kw)
        LOG.searches[index] = (layout, floor, rate)
        return rate, best

    counted_capacity.cache_clear = capacity.cache_clear  # type: ignore[attr-defined]
    load.closed_loop, load.open_loop = counted_closed, counted_open  # type: ignore[assignment]
    load.goodput_capacity = counted_capacity  # type: ignore[assignment]


def _oracle_ms(runs: list[Run], with_first: bool = False) -> float:
    """CPU of the open/search runs an oracle search would skip (module docstring);
    `with_first`: the search's first run too, as if the cost choice's order did not need it."""
    saved = 0.0
    by_search: dict[int, list[Run]] = collections.defaultdict(list)
    last = {layout: i for i, (layout, _, _) in enumerate(LOG.searches)}
    for r in runs:
        if r.purpose == "open/search":
            by_search[r.search].append(r)
        elif with_first and r.purpose == "open/first" and r.layout in last:
            by_search[last[r.layout]].append(r)
    for index, group in by_search.items():
        _, floor, rate = LOG.searches[index]
        keep = [r for r in group if r.passed and r.rate == rate][:1]
        above = [r for r in group if not r.passed and r.rate > rate and r.rate >= floor]
        keep += sorted(above, key=lambda r: r.rate)[:1]
        saved += sum(r.ms for r in group if all(r is not k for k in keep))
    return saved


def _one(model: str, gpu: str, kw: dict[str, Any]) -> tuple[float, list[Run]]:
    req = PlanRequest(arch=load_model(model), gpu=get_gpu(gpu), **kw)
    load.clear_caches()
    LOG.runs.clear()
    LOG.searches.clear()
    start = time.process_time()
    with contextlib.suppress(PlanError):  # refused cases count too: their runs are spent
        plan(req)
    return (time.process_time() - start) * 1e3, list(LOG.runs)


def main(cases: list[tuple[str, str, dict[str, Any]]], detail: bool) -> None:
    _install()
    totals: collections.Counter[str] = collections.Counter()
    spent: collections.Counter[str] = collections.Counter()
    total_ms = run_ms = oracle = oracle_first = 0.0
    repeated = 0
    for model, gpu, kw in cases:
        ms, runs = _one(model, gpu, kw)
        total_ms += ms
        run_ms += sum(r.ms for r in runs)
        saved = _oracle_ms(runs)
        oracle += saved
        oracle_first += _oracle_ms(runs, with_first=True)
        repeated += len(runs) - len({r.inputs for r in runs})
        for r in runs:
            totals[r.purpose] += 1
            spent[r.purpose] += r.ms
        if detail:
            used = sum(r.ms for r in runs)
            print(f"{model} {gpu} {kw or ''}: plan() {ms:.1f} ms, runs {used:.1f} ms")
            with_first = _oracle_ms(runs, with_first=True)
            print(f"  an oracle goodput search would save {saved:.1f} ms ({with_first:.1f})")
            table: dict[tuple[str, str], list[float]] = collections.defaultdict(list)
            for r in runs:
                table[(r.layout, r.purpose)].append(r.ms)
            for (layout, purpose), times in sorted(table.items()):
                print(f"  {layout:9} {purpose:18} {len(times):2} runs {sum(times):5.1f} ms")
    print(f"{len(cases)} cases: plan() {total_ms:.0f} ms, of it runs {run_ms:.0f} ms")
    print(f"  {sum(totals.values())} runs, {repeated} of them with the inputs of an earlier one")
    print(f"  an oracle goodput search would save {oracle:.0f} ms")
    print(f"  ... {oracle_first:.0f} ms if it could skip the cost choice's first runs too")
    for purpose, n in sorted(totals.items()):
        print(f"  {purpose:18} {n:5} runs {spent[purpose]:7.0f} ms")


if __name__ == "__main__":
    if len(sys.argv) == 2 and sys.argv[1] == "all":
        from tests.support.plan_cases import GPUS, MODELS, WORKLOADS  # type: ignore[import-not-found]

        main([(m, g, w) for m in MODELS for g in GPUS for w in WORKLOADS], detail=False)
    elif len(sys.argv) == 1:
        main(BENCH, detail=True)
    else:
        sys.exit(__doc__)
