"""Predict one measured silicon row the way its benchmark ran.

The replica is sized by plan() with the engine's default batch limits (the benchmarks ran
the engines' defaults); then the scheduler core runs the benchmark in virtual time: C
clients all starting at once, ROUNDS x C requests of exactly ISL / OSL tokens (ignore_eos),
every request counted (scheduling/virtual.py benchmark_loop). The reported numbers are the
means the client reports.
"""

from __future__ import annotations

from tokenfleet.capacity import load, step_model
from tokenfleet.capacity.engine_profiles import default_batch_limits
from tokenfleet.capacity.errors import PlanError
from tokenfleet.capacity.gpus import get_gpu
from tokenfleet.capacity.kernels import REQUEST_OVERHEAD_S
from tokenfleet.capacity.planner import plan
from tokenfleet.capacity.silicon import Refused, Resolved, Scored, SiliconRow, resolve
from tokenfleet.capacity.types import Plan, PlanRequest
from tokenfleet.scheduling.virtual import benchmark_loop, mean_of_rounds

# AIConfigurator's benchmark template (generator/config/backend_templates/benchmark/
# bench_run.sh.j2): `aiperf profile --concurrency C --num-requests C x 20` after a
# separate warm-up of 2 x C requests, so the measured phase starts as a burst of C.
ROUNDS = 20


_PLANS: dict[tuple[object, ...], Plan] = {}


def _plan(row: SiliconRow, r: Resolved) -> Plan:
    """plan() for the row's configuration; rows at other concurrencies share it."""
    key = (row.model, r.gpu_id, r.quantization, r.expert_parallel, row.engine, row.version,
           row.tp, row.pp, row.isl, row.osl)  # fmt: skip
    if key not in _PLANS:
        gpu = get_gpu(r.gpu_id)
        _, seqs = default_batch_limits(row.engine, gpu)
        _PLANS[key] = plan(
            PlanRequest(
                arch=r.arch,
                gpu=gpu,
                engine="sglang" if row.engine == "sglang" else "vllm",
                engine_version=row.version or None,
                tensor_parallel_size=row.tp,
                pipeline_parallel_size=row.pp,
                quantization=r.quantization,
                expert_parallel=r.expert_parallel,
                max_num_seqs=seqs,
                concurrency=1,
                input_tokens=row.isl,
                output_tokens=row.osl,
            )
        )
    return _PLANS[key]


def predict_row(row: SiliconRow) -> Scored | Refused:
    r = resolve(row)
    if isinstance(r, str):
        return Refused(row, r)
    try:
        p = _plan(row, r)
    except PlanError as e:
        return Refused(row, f"plan() refuses it: {e}")
    replica = load.Replica.of(
        row.engine,
        p.kv_cache_tokens,
        p.max_num_seqs,
        p.max_num_batched_tokens,
        p.max_model_len,
        p.pipeline_parallel_size,
    )
    timer = step_model(p)
    scaled, config, w = load.lockstep(replica, timer, row.concurrency, row.isl + row.osl)
    clients = max(1, round(row.concurrency / w))
    first, later = benchmark_loop(
        config,
        scaled,
        clients,
        (row.isl, row.osl),
        ROUNDS,
        request_overhead=REQUEST_OVERHEAD_S,
    )
    ttft = mean_of_rounds(first.ttft_mean, later.ttft_mean, ROUNDS)
    tpot = mean_of_rounds(first.tpot_mean, later.tpot_mean, ROUNDS)
    return Scored(row, p, ttft * 1e3, tpot * 1e3)
