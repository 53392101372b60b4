"""Predict one measured silicon row the way its benchmark ran.

The replica is sized by plan() with the engine's default batch limits (the benchmarks ran
the engines' defaults); then the scheduler core runs the benchmark in virtual time: C
clients all starting at once, ROUNDS x C requests of exactly ISL / OSL tokens (ignore_eos),
every request counted. What happens after the first wave depends on the scheduler:
- SGLang (prefill batches apart from decode): a prefill batch takes every waiting request,
  stalls the decodes and starts its members decoding together, so they finish together and
  come back together: the waves stay synchronised (benchmark_loop, all rounds);
- vLLM V1 (prefill chunks mixed into decode steps): arrivals join the running batch step by
  step and the waves drift apart: the first wave queues behind each other's prefill
  (first_wave), the later ones run as the steady closed loop (load.closed); the mean weighs
  the first wave by 1 / burst_rounds (capacity/overheads.py: how many rounds the start burst
  takes to spread, fitted on the H100 rows).
That split is what the H100 calibration rows show (SGLang's mean TTFT is a burst's at every
concurrency; vLLM's grows slowly with it); docs/capacity-model.md has the numbers. SGLang rows
launched with --enable-mixed-chunk (calibration/silicon_harness.py: 0.5.6.post2 and later, as
AIConfigurator's generator launches them) run vLLM's schedule, their start burst weighing
what vLLM's does (the H100 rows hold no mixed SGLang row to fit it on).
"""

from __future__ import annotations

from tokenfleet.calibration.silicon import Refused, Resolved, Scored, SiliconRow, resolve
from tokenfleet.calibration.silicon_harness import DEFAULT, Harness
from tokenfleet.capacity import load, step_model
from tokenfleet.capacity.benchmark import Phases, Simulated, closed_loop_phases
from tokenfleet.capacity.engine_profiles import default_batch_limits, modelled_kind
from tokenfleet.capacity.gpus import get_gpu
from tokenfleet.capacity.overheads import mixed_burst_rounds, request_overhead_s
from tokenfleet.capacity.planner import plan
from tokenfleet.capacity.prefix import prefill_tokens
from tokenfleet.capacity.sglang_defaults import launch_page_size
from tokenfleet.capacity.types import Plan, PlanRequest
from tokenfleet.errors import UserError

# AIConfigurator's benchmark template (generator/config/backend_templates/benchmark/
# bench_run.sh.j2): `aiperf profile --concurrency C --num-requests C x 20` (x 50 in later
# versions) after a separate warm-up of 2 x C requests, so the measured phase starts as a
# burst of C.
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
                engine=modelled_kind(row.engine),
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


def simulate(
    row: SiliconRow,
    p: Plan,
    overhead_s: float,
    burst_rounds: int | None = None,
    harness: Harness = DEFAULT,
) -> Simulated:
    """The benchmark of `row` on the planned replica `p`, each request spending
    `overhead_s` outside the engine; a mixed schedule's start burst weighs 1 / `burst_rounds`
    (default: capacity/overheads.py's)."""
    run = phases(row, p, overhead_s, harness)
    if isinstance(run, Phases):
        return run.mean(burst_rounds or mixed_burst_rounds())
    return run


def phases(
    row: SiliconRow, p: Plan, overhead_s: float, harness: Harness = DEFAULT
) -> Simulated | Phases:
    """SGLang's whole benchmark (its separate prefill batches keep the waves together), or
    the two phases of a mixed schedule (vLLM, SGLang with --enable-mixed-chunk). A request
    prefills what the harness's repeated prompts leave uncached; the KV cache is sized on
    the whole prompt."""
    replica = load.Replica.for_plan(p)
    r = resolve(row)
    page = 1 if isinstance(r, str) else launch_page_size(r.gpu_id, r.arch, row.tp)
    replica = harness.launch(row.engine, row.version, row.isl, replica, page)
    c, running = row.concurrency, min(row.concurrency, p.max_num_seqs)

    def prefill(first: int, count: int | None = None) -> int:
        h = harness.hit_rate(c, p.kv_cache_tokens, running, row.isl, row.osl, first, count)
        return prefill_tokens(row.isl, h)

    # SGLang's loop is simulated whole (its hits averaged over every round); a mixed
    # schedule's first wave sees the first wave's hits, the steady loop the rest's.
    first = prefill(0) if not replica.mixed_prefill else prefill(0, c)
    return closed_loop_phases(
        step_model(p), replica, c, (first, row.osl), (prefill(c), row.osl), overhead_s, ROUNDS
    )


def predict_row(row: SiliconRow, harness: Harness = DEFAULT) -> Scored | Refused:
    r = resolve(row)
    if isinstance(r, str):
        return Refused(row, r)
    try:
        p = _plan(row, r)
    except UserError as e:
        return Refused(row, f"plan() refuses it: {e}")
    s = simulate(row, p, request_overhead_s(row.engine, row.isl), harness=harness)
    return Scored(row, p, s.ttft_s * 1e3, s.tpot_s * 1e3)
