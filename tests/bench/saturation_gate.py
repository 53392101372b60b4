"""The every-slot-busy estimate (tokenfleet/scheduling/steady.py) against the simulated
closed loop, and plan()'s sensitivity to the saturation value, over plan_cases.py's table.

    python tests/bench/saturation_gate.py runs             # estimate vs simulation, per run
    python tests/bench/saturation_gate.py runs all         # ... with the held-out GPUs
    python tests/bench/saturation_gate.py perturb 0.001 > p.jsonl  # saturation x 1.001
    python tests/bench/saturation_gate.py compare old.jsonl new.jsonl
    python tests/bench/saturation_gate.py loops            # SGLang's 64-client loops

`runs` takes every every-slot-busy run a cold plan() of the cases makes (search_start with
more slots than the target concurrency) and compares closed()'s requests_per_second with
the estimate on the same lockstep run. The estimate is the steady state of
scheduling/steady.py, except where the run could preempt (its clients' requests, at full
length on SGLang and at half their output on vLLM, overfill its KV cache) or caps prompt
pieces: those are simulated (counted apart). The l4 and h100-sxm cases are the
development set; `all` adds a100-80gb and h200, held out.

`loops` compares the estimate with the simulation on the closed loops of
test_steady.py's catalog cases (64 clients, plan()'s own layout and limits) for SGLang,
over more models, GPUs and request shapes than that table: the regime where prefill
batches run apart from the decodes, per shape.

`perturb DELTA` prints plan_cases.py's rows with the simulated saturation scaled by
1 + DELTA (the goodput search's guess, probe and ceiling follow it): how far the plans of
the exact model move when only its saturation does.

`compare OLD NEW` (two plan_cases.py dumps): the cases whose layout changed, each priced
by the tree on PYTHONPATH with both layouts fixed (cost per good request, new over old),
the goodput drift (median, p90, max) and the saturation change where the layout stayed.
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import time
from dataclasses import replace
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

from tests.support.plan_cases import GPUS, MODELS, WORKLOADS, plan_row
from tests.support.scheduler_runs import steady_replica
from tokenfleet.capacity import (
    PlanError,
    PlanRequest,
    get_gpu,
    load,
    load_model,
    plan,
    planner,
)
from tokenfleet.capacity.cost_choice import cost_per_million_good

DEV = ("l4", "h100-sxm")
WITHIN = 0.05


def estimate(timer: Any, replica: Any, slots: int, i: int, o: int) -> tuple[float, bool]:
    """(requests/s, estimated): the steady state on closed()'s own lockstep run, or the
    simulation where that run could preempt or caps prompt pieces."""
    from tokenfleet.scheduling.steady import closed_loop_rate

    c = max(1, min(slots, replica.max_num_seqs * 64))
    scaled, config, w = load.lockstep(replica, timer, c, i + o)
    clients = max(1, round(c / w))
    tokens = i + (o // 2 if config.mixed_prefill else o)
    held = -(-tokens // config.block_size) * config.block_size
    if clients * held > config.kv_cache_tokens or config.long_prefill_token_threshold > 0:
        return load.closed(timer, replica, slots, i, o).requests_per_second, False
    overhead = load._overhead(replica, i, None)
    return closed_loop_rate(config, scaled, clients, i, o, overhead) * w, True


def _busy_runs(req: PlanRequest) -> list[tuple[Any, ...]]:
    seen: list[tuple[Any, ...]] = []
    real = load.search_start

    def spy(timer: Any, replica: Any, c: int, i: int, o: int, slots: int, *rest: Any) -> Any:
        if slots > c and (timer, replica, max(slots, 1), i, o) not in seen:
            seen.append((timer, replica, max(slots, 1), i, o))
        return real(timer, replica, c, i, o, slots, *rest)

    _swap(spy)
    try:
        load.clear_caches()
        plan(req)
    except PlanError:
        pass
    finally:
        _swap(real)
    return seen


def _swap(search_start: Any) -> None:
    """Replace search_start where plan() calls it: the planner's cost order and load's own."""
    planner.search_start = search_start
    load.search_start = search_start


def _q(values: list[float], q: float) -> float:
    return sorted(values)[min(len(values) - 1, int(q * len(values)))]


def runs(held_out: bool) -> None:
    splits = [("development", DEV)]
    if held_out:
        splits.append(("held out", tuple(g for g in GPUS if g not in DEV)))
    for name, gpus in splits:
        errors: list[float] = []
        cpu: list[float] = []
        simulated = 0
        worst: tuple[float, Any] = (0.0, None)
        for model in MODELS:
            for gpu in gpus:
                for workload in WORKLOADS:
                    req = PlanRequest(arch=load_model(model), gpu=get_gpu(gpu), **workload)
                    for timer, replica, slots, i, o in _busy_runs(req):
                        sim = load.closed(timer, replica, slots, i, o).requests_per_second
                        start = time.process_time()
                        est, estimated = estimate(timer, replica, slots, i, o)
                        seconds = time.process_time() - start
                        if not estimated:
                            simulated += 1
                            continue
                        err = est / sim - 1
                        errors.append(abs(err))
                        cpu.append(seconds)
                        if abs(err) > abs(worst[0]):
                            worst = (err, [model, gpu, workload, slots])
        inside = sum(e <= WITHIN for e in errors)
        total = len(errors) + simulated
        print(
            f"{name}: {total} every-slot-busy runs, {simulated} simulated (could preempt); "
            f"estimated {len(errors)}: |error| median {statistics.median(errors):.2%}, "
            f"p90 {_q(errors, 0.9):.2%}, max {worst[0]:+.2%} at {worst[1]}; within "
            f"{WITHIN:.0%}: {inside + simulated} of {total} ({(inside + simulated) / total:.1%}); "
            f"estimate CPU median {statistics.median(cpu) * 1e3:.3f} ms"
        )


LOOP_MODELS = (
    "Qwen/Qwen3-30B-A3B",
    "openai/gpt-oss-120b",
    "meta-llama/Llama-3.1-8B",
    "mistralai/Mixtral-8x7B-v0.1",
    "Qwen/Qwen2.5-7B",
)
LOOP_SHAPES = ((256, 64), (512, 128), (1024, 256), (2048, 300))


def loops() -> None:
    from tokenfleet.capacity import step_model
    from tokenfleet.capacity.overheads import request_overhead_s
    from tokenfleet.scheduling.steady import closed_loop_rate
    from tokenfleet.scheduling.virtual import closed_loop

    for i, o in LOOP_SHAPES:
        errors: list[float] = []
        for model in LOOP_MODELS:
            for gpu in GPUS:
                req = PlanRequest(
                    arch=load_model(model),
                    gpu=get_gpu(gpu),
                    engine="sglang",
                    input_tokens=i,
                    output_tokens=o,
                )
                try:
                    p = plan(req)
                    config, clients = steady_replica(p, i, o)  # SGLang's pages and batches
                    timer = step_model(p)
                    h = request_overhead_s("sglang", i)
                    measured = max(32, clients // 2)
                    sim = closed_loop(
                        config, timer, clients, [(i, o)], measured, request_overhead=h
                    )
                except (PlanError, ValueError):
                    continue  # no plan, or no KV cache for a full-length request
                est = closed_loop_rate(config, timer, clients, i, o, h)
                errors.append(est / sim.requests_per_second - 1)
        inside = sum(abs(e) <= WITHIN for e in errors)
        print(
            f"{i}/{o} tokens: {len(errors)} loops, within {WITHIN:.0%}: {inside}; error median "
            f"{statistics.median(errors):+.2%}, |error| max {max(map(abs, errors)):.2%}"
        )


def perturb(delta: float) -> None:
    real = load.search_start

    def scaled(timer: Any, replica: Any, c: int, i: int, o: int, slots: int, *rest: Any) -> Any:
        s = real(timer, replica, c, i, o, slots, *rest)
        if slots <= c:
            return s
        ttft, tpot = rest
        full = load.closed(timer, replica, max(slots, 1), i, o).requests_per_second
        top = max(full * (1 + delta), s.at.requests_per_second)
        meets = s.at.ttft_p95 <= ttft and s.at.tpot_p95 <= tpot
        guess, probe = s.at.requests_per_second * (0.9 if meets else 0.5), None
        if meets and load.GUESS_OF_SATURATION * top > guess:
            guess, probe = load.GUESS_OF_SATURATION * top, top
        return load.SearchStart(s.at, s.one, top, guess, probe)

    _swap(scaled)
    for model in MODELS:
        for gpu in GPUS:
            for workload in WORKLOADS:
                row = plan_row(model, gpu, workload)
                row["ms"] = 0.0
                print(json.dumps(row), flush=True)


def _cost(req: PlanRequest, tp: int, pp: int) -> float:
    load.clear_caches()
    fixed = replace(req, tensor_parallel_size=tp, pipeline_parallel_size=pp, pipeline_auto=False)
    return cost_per_million_good(plan(fixed))


def compare(old_path: str, new_path: str) -> None:
    with open(old_path) as f:
        old = [json.loads(line) for line in f]
    with open(new_path) as f:
        new = [json.loads(line) for line in f]
    drift: list[float] = []
    saturation: list[float] = []
    changed = far = 0
    for a, b in zip(old, new, strict=True):
        if "error" in a or "error" in b:
            continue
        if (a["tp"], a["pp"]) != (b["tp"], b["pp"]):
            model, gpu, workload = a["case"]
            req = PlanRequest(arch=load_model(model), gpu=get_gpu(gpu), **workload)
            ratio = _cost(req, b["tp"], b["pp"]) / _cost(req, a["tp"], a["pp"])
            changed += 1
            far += abs(ratio - 1) > 0.12
            print(
                f"layout TP {a['tp']} x PP {a['pp']} -> TP {b['tp']} x PP {b['pp']} at "
                f"{a['case']}: cost per good request {ratio - 1:+.1%}"
            )
            continue
        x, y = a["pred"], b["pred"]
        if x["goodput_requests_per_second"] > 0:
            drift.append(
                abs(y["goodput_requests_per_second"] / x["goodput_requests_per_second"] - 1)
            )
        saturation.append(
            abs(y["saturation_requests_per_second"] / x["saturation_requests_per_second"] - 1)
        )
    print(f"{changed} layouts changed, {far} of them by more than 12% in cost per good request")
    print(
        f"goodput drift where the layout stayed ({len(drift)}): median "
        f"{statistics.median(drift):.2%}, p90 {_q(drift, 0.9):.2%}, max {max(drift):.1%}"
    )
    inside = sum(s <= WITHIN for s in saturation)
    print(
        f"saturation where the layout stayed ({len(saturation)}): within {WITHIN:.0%} in "
        f"{inside} ({inside / len(saturation):.1%}), median {statistics.median(saturation):.2%}, "
        f"max {max(saturation):.1%}"
    )


if __name__ == "__main__":
    args = sys.argv[1:]
    if args[:1] == ["runs"] and args[1:] in ([], ["all"]):
        runs(args[1:] == ["all"])
    elif args == ["loops"]:
        loops()
    elif len(args) == 2 and args[0] == "perturb":
        perturb(float(args[1]))
    elif len(args) == 3 and args[0] == "compare":
        compare(args[1], args[2])
    else:
        sys.exit(__doc__)
