"""plan(): choose TP / PP / memory settings for one replica and say why.

Candidates are (TP, PP) layouts: TP must divide the attention heads and be compatible with
the KV heads (one divides the other), fit in a node, and PP spans whole nodes once a replica
outgrows one. Each candidate is evaluated by the memory model; the objective picks one:
- min-gpus (default): the fewest GPUs whose KV cache holds the target concurrency of
  input + output tokens (or, if none can, the fewest GPUs that can start at all);
- latency: the single-node layout with the lowest predicted end-to-end latency.
A request that fits nowhere is rejected with the numbers that show why.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import NamedTuple

from tokenfleet.capacity import cost_choice, gpu_choice, sglang_memory
from tokenfleet.capacity.architecture import ModelArch
from tokenfleet.capacity.engine_profiles import (
    EngineProfile,
    default_batch_limits,
    engine_facts,
    engine_profile,
    sglang_default_mem_fraction,
)
from tokenfleet.capacity.errors import PlanError
from tokenfleet.capacity.fleet import size_fleet
from tokenfleet.capacity.kernels import STEP_OVERHEAD_S
from tokenfleet.capacity.kv import kv_dtype_bytes
from tokenfleet.capacity.load import (
    Replica,
    Timer,
    closed,
    first_probe_passes,
    predict_under_load,
    search_start,
)
from tokenfleet.capacity.long_prefill import long_prefill_threshold
from tokenfleet.capacity.lora import LoraSlots, adapter_bytes, resolve
from tokenfleet.capacity.lora import step_seconds as lora_step_seconds
from tokenfleet.capacity.lora_plan import plan_with_adapters
from tokenfleet.capacity.memory import (
    CUDA_CONTEXT_GIB,
    Evaluation,
    Layout,
    Settings,
    cuda_graph_bytes,
    evaluate,
)
from tokenfleet.capacity.overheads import request_overhead_s
from tokenfleet.capacity.performance import (
    StepModel,
    Workload,
    build_step_model,
    predict,
)
from tokenfleet.capacity.prefix import explain as explain_prefix
from tokenfleet.capacity.prefix import prefill_share, prefill_tokens
from tokenfleet.capacity.quantization import WeightFormat, weight_format
from tokenfleet.capacity.slo_margin import barely_met
from tokenfleet.capacity.speculative import (
    Draft,
    SpeculativePlan,
    SpeculativeRequest,
    SpeculativeTimer,
    crossover_batch,
    draft_of,
    draft_step_model,
    step_arch,
)
from tokenfleet.capacity.speculative_plan import plan_with_speculation
from tokenfleet.capacity.types import GIB, Plan, PlanRequest

MAX_MEMORY_FRACTION = 0.95
HEADROOM_GIB = 1.0  # left free for allocator fragmentation and the occasional spike
MAX_PP = 8
SMALL_KV_SHARE = 0.10  # KV below this share of the budget: its size is uncertain (warned)
OVERHEAD_UNCERTAINTY_GIB = 1.0  # spread of non-KV overheads across versions (engines.md)


def valid_tp_sizes(arch: ModelArch, limit: int) -> list[int]:
    heads, kv = arch.attention.heads, arch.attention.kv_heads
    return [
        t
        for t in range(1, limit + 1)
        if heads % t == 0 and (kv % t == 0 or t % kv == 0 or arch.attention.is_mla)
    ]


def _check_tp(arch: ModelArch, tp: int, per_node: int) -> None:
    a = arch.attention
    if tp < 1:
        raise PlanError("tp", tp, "must be at least 1", "use 1, 2, 4 or 8")
    valid = valid_tp_sizes(arch, max(per_node, tp))
    if tp not in valid:
        why = (
            f"does not divide the {a.heads} attention heads"
            if a.heads % tp
            else f"and the {a.kv_heads} KV heads do not divide each other"
        )
        raise PlanError(
            "tp",
            tp,
            f"tensor-parallel size {why} of {arch.name}",
            f"use one of {', '.join(map(str, valid))}",
        )
    if tp > per_node:
        raise PlanError(
            "tp",
            tp,
            f"exceeds the {per_node} GPUs of one node",
            "keep TP within a node and add --pp for more nodes",
        )


def _candidates(req: PlanRequest, per_node: int) -> list[Layout]:
    """Layouts to try, fewest GPUs first.

    Inside a node tensor parallelism wins (NVLink, no pipeline bubbles), so PP > 1 is only
    tried at the largest valid TP, where it spans whole nodes (or fills a node whose GPUs
    the heads cannot all use for TP). Fixed --tp / --pp are honoured as given; with a fixed
    --tp and no --pp the replica has one stage unless --pp auto lets the planner add more.
    """
    arch = req.arch
    if req.gpu.parent is not None:
        return [_one_slice(req)]
    if req.tensor_parallel_size is not None:
        _check_tp(arch, req.tensor_parallel_size, per_node)
    if req.pipeline_parallel_size is not None and not (
        1 <= req.pipeline_parallel_size <= arch.layers
    ):
        raise PlanError(
            "pp",
            req.pipeline_parallel_size,
            f"must be 1..{arch.layers}",
            "use a pipeline size no larger than the layer count",
        )
    valid = valid_tp_sizes(arch, per_node)
    tps = [req.tensor_parallel_size] if req.tensor_parallel_size else valid
    out = []
    for tp in tps:
        if req.pipeline_parallel_size is not None:
            pps = [req.pipeline_parallel_size]
        elif req.tensor_parallel_size and not req.pipeline_auto:
            pps = [1]  # a fixed TP never grows pipeline stages silently (--pp auto asks)
        elif tp == max(valid) or req.tensor_parallel_size:
            pps = list(range(1, MAX_PP + 1))
        else:
            pps = [1]
        for pp in pps:
            gpus = tp * pp
            if gpus > per_node and (gpus % per_node or gpus // per_node > req.max_nodes):
                continue  # a multi-node replica fills whole nodes
            out.append(Layout(tp, pp))
    return sorted(out, key=lambda lay: (lay.tp * lay.pp, lay.pp))


def _one_slice(req: PlanRequest) -> Layout:
    """A MIG slice is one CUDA device with no peer-to-peer link (capacity/mig.py): a
    replica runs on exactly one."""
    for flag, value in (("tp", req.tensor_parallel_size), ("pp", req.pipeline_parallel_size)):
        if value not in (None, 1):
            raise PlanError(
                flag,
                value,
                f"{req.gpu.id} is a MIG slice, and a replica runs on one slice (CUDA sees one "
                "MIG device per process and MIG has no GPU-to-GPU link)",
                f"use --{flag} 1, a larger slice, or the whole {req.gpu.parent} for parallelism",
            )
    return Layout(1, 1)


@dataclass(frozen=True)
class _Context:
    req: PlanRequest
    profile: EngineProfile
    fmt: WeightFormat
    kv_bytes: float
    per_node: int
    batched: int
    max_seqs_default: int
    lora: LoraSlots | None = None
    speculative: SpeculativeRequest | None = None


def _draft(ctx: _Context, tp: int) -> Draft | None:
    """The speculative proposer's weights and KV at TP `tp` (None: speculation off)."""
    sp = ctx.speculative
    if sp is None:
        return None
    return draft_of(sp, ctx.req.arch, tp, ctx.kv_bytes, ctx.fmt.dtype_bytes, ctx.fmt)


def _memory_fraction(ctx: _Context, lay: Layout) -> float:
    req, gpu = ctx.req, ctx.req.gpu
    if req.memory_fraction is not None:
        if not 0.05 <= req.memory_fraction <= 0.99:
            flag = engine_facts(req.engine).memory_flag
            raise PlanError(
                flag, req.memory_fraction, "must be between 0.05 and 0.99", "use e.g. 0.9"
            )
        return req.memory_fraction
    if not engine_facts(req.engine).profile_run:
        default = sglang_default_mem_fraction(gpu, ctx.batched, lay.tp, lay.pp, ctx.profile.version)
        seqs = req.max_num_seqs or ctx.max_seqs_default
        s = Settings(default, req.max_model_len or req.arch.max_context, ctx.batched, seqs,
                     ctx.kv_bytes, expert_parallel=req.expert_parallel, lora=ctx.lora,
                     draft=_draft(ctx, lay.tp))  # fmt: skip
        need = req.input_tokens + req.output_tokens
        return sglang_memory.fraction_for(req.arch, gpu, ctx.profile, ctx.fmt, lay, s, need)
    # vLLM: as high as leaves room for the CUDA context, graphs captured outside the budget
    # (0.9-0.20) and some headroom; never above 0.95.
    outside = (
        0.0
        if ctx.profile.cuda_graphs_in_budget
        else cuda_graph_bytes(math.ceil(req.arch.layers / lay.pp), lay.tp) / GIB
    )
    safe = (gpu.memory_gib - CUDA_CONTEXT_GIB - outside - HEADROOM_GIB) / gpu.memory_gib
    return min(MAX_MEMORY_FRACTION, math.floor(safe * 100) / 100)


def _settings(ctx: _Context, lay: Layout, max_len: int) -> Settings:
    seqs = ctx.req.max_num_seqs or ctx.max_seqs_default
    return Settings(
        _memory_fraction(ctx, lay),
        max_len,
        ctx.batched,
        seqs,
        ctx.kv_bytes,
        expert_parallel=ctx.req.expert_parallel,
        lora=ctx.lora,
        draft=_draft(ctx, lay.tp),
    )


def _fits(ev: Evaluation, need_tokens: int) -> bool:
    return ev.memory.kv_cache > 0 and ev.kv_tokens >= need_tokens


def _fewest_seqs(ctx: _Context) -> int:
    """The fewest seats plan() renders for the workload (_max_num_seqs: the concurrency,
    rounded up to 8)."""
    return max(1, min(ctx.max_seqs_default, math.ceil(ctx.req.concurrency / 8) * 8))


def _evaluate(ctx: _Context, lay: Layout, max_len: int, need_tokens: int) -> Evaluation:
    """The layout at `max_len` with the engine's default seats or, where vLLM's profile of
    its sampler over that many sequences leaves too little KV cache for `need_tokens`, with
    the fewest seats the plan renders. vLLM runs the dummy sampler over --max-num-seqs
    logits after the dummy forward has freed its activations
    (vllm/v1/worker/gpu_model_runner.py profile_run, _dummy_sampler_run), so a plan that
    renders fewer seats reserves that much less: a 32K-token prompt of Qwen3-32B at TP 1 on
    an H100 (151,936-token vocabulary: 2.3 GiB of sampler buffers at 1024 seats) fits with
    the few the KV cache holds anyway."""
    req = ctx.req
    settings = _settings(ctx, lay, max_len)
    ev = evaluate(req.arch, req.gpu, ctx.profile, ctx.fmt, lay, settings)
    fewest = _fewest_seqs(ctx)
    sampler_in_profile = engine_facts(req.engine).profile_run
    if _fits(ev, need_tokens) or req.max_num_seqs is not None or not sampler_in_profile:
        return ev
    if fewest >= settings.max_num_seqs:
        return ev
    fewer = evaluate(
        req.arch, req.gpu, ctx.profile, ctx.fmt, lay, replace(settings, max_num_seqs=fewest)
    )
    return fewer if _fits(fewer, need_tokens) else ev


def _explain_no_fit(ctx: _Context, evs: list[Evaluation], max_len: int) -> PlanError:
    req = ctx.req
    last = evs[-1] if evs else None
    total_w = (last.weights_total if last else 0) / GIB
    if last is None:
        return PlanError("tp", req.tensor_parallel_size, "no valid layout", "drop --tp/--pp")
    m = last.memory
    lay = last.layout
    detail = (
        f"at TP {lay.tp} x PP {lay.pp} each {req.gpu.id} has a {m.budget / GIB:.1f} GiB budget "
        f"for {m.weights / GIB:.1f} GiB weights + {m.activation / GIB:.1f} GiB activation + "
        f"{m.non_torch / GIB:.1f} GiB overhead, leaving {max(m.kv_cache, 0) / GIB:.2f} GiB "
        f"= {last.kv_tokens} KV tokens for a {max_len}-token context"
    )
    field = "model" if req.tensor_parallel_size is None else "tp"
    value = req.arch.name if field == "model" else req.tensor_parallel_size
    fix = (
        "use a larger GPU, more GPUs (--tp/--pp), --quantization fp8, --kv-cache-dtype fp8 "
        "or a smaller --max-model-len"
    )
    if req.gpu.parent is not None:  # a MIG slice: one per replica (capacity/mig.py)
        fix = (
            f"use a larger slice or the whole {req.gpu.parent}, " + fix.split("(--tp/--pp), ", 1)[1]
        )
    elif req.tensor_parallel_size and req.pipeline_parallel_size is None and not req.pipeline_auto:
        fix = (
            f"TP {req.tensor_parallel_size} alone cannot hold it: add pipeline stages "
            "(--pp auto or --pp N), raise --tp, or " + fix.split("(--tp/--pp), ", 1)[1]
        )
    return PlanError(field, value, f"does not fit ({total_w:.1f} GiB of weights); {detail}", fix)


@dataclass(frozen=True)
class _Considered:
    """What the cost objective's reason compares the chosen layout with."""

    smallest: bool  # the chosen layout is the smallest that starts
    evaluated: list[Evaluation]
    startable: list[Evaluation]
    per_request: int


def _choose(
    ctx: _Context, layouts: list[Layout]
) -> tuple[Evaluation, int, str, list[str], _Considered]:
    """Pick a layout; returns (evaluation, max_model_len, reason, warnings, considered)."""
    req, arch = ctx.req, ctx.req.arch
    warnings: list[str] = []
    request_tokens = req.input_tokens + req.output_tokens
    want_len = req.max_model_len or arch.max_context
    if req.max_model_len and req.max_model_len > arch.max_context:
        warnings.append(
            f"max-model-len {req.max_model_len} exceeds the model's {arch.max_context}-token "
            "context; the engine needs rope scaling or will refuse it"
        )
    min_len = req.max_model_len or min(arch.max_context, request_tokens)
    if engine_facts(req.engine).starts_below_context:
        # SGLang starts with a pool smaller than its context length (vLLM refuses to); it
        # then rejects requests that do not fit, so require only the workload's length.
        min_len = min(min_len, request_tokens)
    evaluated: list[Evaluation] = []
    startable: list[Evaluation] = []
    for lay in layouts:
        ev = _evaluate(ctx, lay, want_len, min_len)
        evaluated.append(ev)
        if _fits(ev, min_len):
            startable.append(ev)
    if not startable:
        raise _explain_no_fit(ctx, evaluated, min_len)

    def holds_target(ev: Evaluation) -> bool:
        return ev.kv_tokens >= req.concurrency * min(request_tokens, want_len)

    meeting = [ev for ev in startable if holds_target(ev)]
    per_request = max(min(request_tokens, want_len), 1)
    if req.objective == "latency":
        pool = [ev for ev in (meeting or startable) if ev.layout.tp * ev.layout.pp <= ctx.per_node]
        pool = pool or meeting or startable
        chosen = min(pool, key=lambda ev: (_e2e(ctx, ev, want_len), ev.layout.tp * ev.layout.pp))
        why = f"objective latency: lowest predicted latency among {len(pool)} single-node layouts"
    elif req.objective == "cost":
        # The most cost-efficient replica: fewest GPUs in total (replicas x GPUs per replica)
        # for the target concurrency; a replica that cannot hold it gets more replicas, not a
        # wider TP. Ties go to the smaller replica (no TP communication to pay).
        def fleet_gpus(ev: Evaluation) -> int:
            holds = max(ev.kv_tokens // per_request, 1)
            return math.ceil(req.concurrency / holds) * _gpus(ev)

        chosen = min(startable, key=lambda ev: (fleet_gpus(ev), _gpus(ev), ev.layout.pp))
        why = ""  # written below, once max-model-len is settled
    elif meeting:
        chosen = meeting[0]
        why = (
            f"objective min-gpus: fewest GPUs whose KV cache holds {req.concurrency} concurrent "
            f"{request_tokens}-token requests"
        )
        smaller = [ev for ev in evaluated if _gpus(ev) < _gpus(chosen)]
        if smaller:
            why += "; " + _shortfall(smaller[-1])
    else:
        chosen = max(startable, key=lambda ev: ev.kv_tokens / _gpus(ev))
        why = "objective min-gpus: no layout holds the target concurrency; best KV tokens per GPU"
    per_replica = int(chosen.kv_tokens // per_request)
    if not meeting and req.objective != "cost":
        warnings.append(
            f"no layout holds {req.concurrency} concurrent {request_tokens}-token requests in KV "
            f"cache; one replica holds {per_replica}: run "
            f"{math.ceil(req.concurrency / max(per_replica, 1))} replicas or add memory"
        )

    max_len = want_len
    if chosen.kv_tokens < want_len and engine_facts(req.engine).starts_below_context:
        warnings.append(
            f"KV pool holds {chosen.kv_tokens:,} tokens, less than the {want_len}-token context: "
            "SGLang starts, but longer requests are rejected"
        )
    elif chosen.kv_tokens < want_len:
        # Only reachable without --max-model-len: shrink to what the cache holds.
        max_len = max(min_len, chosen.kv_tokens // 1024 * 1024)
        warnings.append(
            f"max-model-len lowered from {want_len} (model maximum) to {max_len} so the KV cache "
            "holds one full-length request; set --max-model-len to choose"
        )
        chosen = _evaluate(ctx, chosen.layout, max_len, min_len)
    if req.tensor_parallel_size and len(layouts) == 1 and req.objective != "cost":
        # Nothing was chosen: name the flags that fixed the layout, not an objective.
        why = f"fixed --tp {req.tensor_parallel_size}" + (
            f" --pp {req.pipeline_parallel_size}" if req.pipeline_parallel_size else ""
        )
    first = chosen.layout == startable[0].layout
    return chosen, max_len, why, warnings, _Considered(first, evaluated, startable, per_request)


def _cost_reason(
    ctx: _Context,
    chosen: Evaluation,
    smallest: bool,
    evaluated: list[Evaluation],
    startable: list[Evaluation],
    per_request: int,
    want_len: int,
) -> str:
    """Name what decided the layout: a fixed TP, the model's size at max-model-len, or the
    target concurrency; and what the cheaper alternative is when one replica is not enough."""
    req, lay = ctx.req, chosen.layout
    c = req.concurrency
    holds = chosen.kv_tokens // per_request
    if req.tensor_parallel_size:
        why = f"fixed --tp {req.tensor_parallel_size}"
    elif smallest and _gpus(chosen) > 1:
        smaller = [ev for ev in evaluated if _gpus(ev) < _gpus(chosen)]
        why = f"max-model-len {want_len:,}: the fewest GPUs that hold the model and one request"
        if smaller:
            why += " (" + _shortfall(smaller[-1]) + ")"
    elif smallest:
        why = f"objective cost: one GPU holds the model at max-model-len {want_len:,}"
    else:
        why = (
            f"objective cost: fewest GPUs in total for {c} concurrent requests "
            f"({math.ceil(c / max(holds, 1))} x {_gpus(chosen)} GPUs)"
        )
    if holds < c:
        more = math.ceil(c / max(holds, 1)) - 1
        why += (
            f"; TP {lay.tp} x PP {lay.pp} holds {holds} of the {c} concurrent requests: "
            f"{more} more replica{'s' if more > 1 else ''} serve{'' if more > 1 else 's'} the rest"
        )
        wider = [
            ev for ev in startable if ev.kv_tokens // per_request >= c and _gpus(ev) > _gpus(chosen)
        ]
        if wider:
            w = wider[0]
            why += f" (TP {w.layout.tp} x PP {w.layout.pp} would hold all {c} on {_gpus(w)} GPUs)"
    return why


def _shortfall(ev: Evaluation) -> str:
    """Why a smaller layout was not enough, in numbers."""
    m, lay = ev.memory, ev.layout
    if m.kv_cache <= 0:
        return (
            f"TP {lay.tp} x PP {lay.pp}: {m.weights / GIB:.1f} GiB weights per GPU + "
            f"{(m.activation + m.non_torch) / GIB:.1f} GiB activation/overhead exceed the "
            f"{m.budget / GIB:.1f} GiB budget"
        )
    return f"TP {lay.tp} x PP {lay.pp} holds only {ev.kv_tokens:,}"


def _gpus(ev: Evaluation) -> int:
    return ev.layout.tp * ev.layout.pp


def _step_model(ctx: _Context, ev: Evaluation) -> StepModel:
    step = build_step_model(
        ctx.req.arch,
        ctx.req.gpu,
        ev.layout.tp,
        ev.layout.pp,
        ctx.fmt,
        ctx.kv_bytes,
        ctx.per_node,
        ctx.profile.step_overhead_s(ev.layout.pp),
    )
    if ctx.lora is None:
        return step
    # Every step pays the LoRA kernels, as if each batch held adapter requests, up to the
    # slots' worth of distinct adapters (capacity/lora.py step_seconds).
    lay, req = ev.layout, ctx.req
    per_adapter = adapter_bytes(req.arch, ctx.lora, req.engine, lay.tp, lay.pp, ctx.fmt.dtype_bytes)
    active = min(ctx.lora.slots, max(ctx.lora.adapters, 1), req.concurrency)
    bandwidth = step.bandwidth * 1e9 * step.bandwidth_efficiency
    extra = lora_step_seconds(req.arch, per_adapter, bandwidth, active)
    return replace(step, overhead_s=step.overhead_s + extra)


def _e2e(ctx: _Context, ev: Evaluation, max_len: int) -> float:
    w = _workload(ctx)
    p = predict(_step_model(ctx, ev), w, w.concurrency, 1, 0.0, 1e9, 1e9)
    return p.ttft_ms + p.tpot_ms * ctx.req.output_tokens


def _estimated_cost(ctx: _Context, lay: Layout) -> float:
    """Closed-form GPU cost per million good requests of a layout (inf: it does not start
    or meets the SLO at no rate): cost_choice's shortlist."""
    req = ctx.req
    want_len = req.max_model_len or req.arch.max_context
    request_tokens = req.input_tokens + req.output_tokens
    ev = _evaluate(ctx, lay, want_len, min(want_len, request_tokens))
    if not _fits(ev, min(want_len, request_tokens)):
        return math.inf
    slots = min(req.max_num_seqs or ctx.max_seqs_default, ev.kv_tokens // request_tokens)
    gpus = _gpus(ev)
    # The closed form has no client overhead: take it out of the TTFT budget.
    ttft_budget = req.ttft_slo_ms / 1e3 - request_overhead_s(req.engine, req.input_tokens)
    p = predict(_step_model(ctx, ev), _workload(ctx), slots, gpus, req.gpu.price_per_hour,
                ttft_budget, req.tpot_slo_ms / 1e3)  # fmt: skip
    if p.goodput_requests_per_second <= 0:
        return math.inf
    return gpus * req.gpu.price_per_hour / (p.goodput_requests_per_second * 3600) * 1e6


def _workload(ctx: _Context) -> Workload:
    r = ctx.req
    prefill = prefill_tokens(r.input_tokens, r.prefix_cache_hit_rate)
    return Workload(r.concurrency, prefill, r.output_tokens, ctx.batched)


def _validate(req: PlanRequest) -> None:
    for field, value in (
        ("concurrency", req.concurrency),
        ("input-tokens", req.input_tokens),
        ("output-tokens", req.output_tokens),
        ("max-model-len", req.max_model_len),
        ("max-num-batched-tokens", req.max_num_batched_tokens),
        ("max-num-seqs", req.max_num_seqs),
        ("max-gpus-per-node", req.max_gpus_per_node),
    ):
        if value is not None and value < 1:
            raise PlanError(field, value, "must be a positive integer", "pass a value >= 1")
    for field, slo in (("ttft-slo-ms", req.ttft_slo_ms), ("tpot-slo-ms", req.tpot_slo_ms)):
        if slo <= 0:
            raise PlanError(field, slo, "must be positive", "pass milliseconds, e.g. 500")
    if req.max_model_len and req.max_model_len < req.input_tokens + req.output_tokens:
        raise PlanError(
            "max-model-len",
            req.max_model_len,
            f"is shorter than input + output tokens ({req.input_tokens + req.output_tokens})",
            "raise --max-model-len or lower --input-tokens/--output-tokens",
        )


def plan(req: PlanRequest) -> Plan:
    """Size one replica for the request. Pure; raises PlanError when nothing fits. With
    gpu_candidates, the cheapest type's plan (capacity/gpu_choice.py); serving mode
    disaggregated or auto: the prefill / decode comparison (capacity/disagg)."""
    if req.gpu_candidates:
        return gpu_choice.choose(req, plan)
    if req.serving.mode != "aggregated":
        from tokenfleet.capacity.disagg.decide import plan_serving

        return plan_serving(req, plan)
    if req.speculative is not None and req.target_requests_per_second is None:
        # With and without the proposer on the same layout (capacity/speculative_plan.py);
        # a fleet plans each layout through here.
        return plan_with_speculation(req, _plan_one)
    return _plan_one(req)


def _plan_one(req: PlanRequest) -> Plan:
    if req.lora is not None:
        return plan_with_adapters(req, _plan)
    return _plan(req)


def _plan(req: PlanRequest, floor_rps: float = 0.0) -> Plan:
    """plan(); `floor_rps`: a goodput below which the caller (cost_choice) drops the plan,
    so the goodput search may stop there (load.goodput_capacity) and report 0."""
    _validate(req)
    ctx = _context(req)
    profile, fmt, per_node = ctx.profile, ctx.fmt, ctx.per_node
    layouts = _candidates(req, per_node)
    if req.target_requests_per_second is not None:
        return _plan_fleet(req, layouts, per_node)
    if req.objective == "cost" and req.tensor_parallel_size is None:
        # The lowest GPU cost per good request among single-node layouts (cost_choice.py);
        # None: none starts on one node or none meets the SLO: the fewest-GPUs rule below.
        cheapest = cost_choice.choose(
            req,
            layouts,
            per_node,
            plan,
            lambda lay: _estimated_cost(ctx, lay),
            _plan,
            _saturation_cost,
        )
        if cheapest is not None:
            return cheapest
    ev, max_len, why, warnings, considered, max_seqs, step, slots, replica, prefill = _size(
        ctx, layouts
    )
    if req.objective == "cost":  # the reason quotes the final numbers
        c = considered
        why = _cost_reason(ctx, ev, c.smallest, c.evaluated, c.startable, c.per_request, max_len)
    warnings += _warnings(ctx, ev, max_len)
    gpus = _gpus(ev)
    prediction = predict_under_load(
        step,
        replica,
        req.concurrency,
        prefill,
        req.output_tokens,
        slots,
        gpus,
        req.gpu.price_per_hour,
        req.ttft_slo_ms / 1e3,
        req.tpot_slo_ms / 1e3,
        floor_rps,
    )
    if req.prefix_cache_hit_rate > 0:
        busy = max(slots, 1)
        full = closed(step, replica, busy, req.input_tokens, req.output_tokens)
        bare = closed(step, replica, busy, 1, req.output_tokens)
        share = prefill_share(full.requests_per_second, bare.requests_per_second)
        why = f"{why}; {explain_prefix(req.input_tokens, req.prefix_cache_hit_rate, share)}"
    one = closed(step, replica, 1, prefill, req.output_tokens)  # cached: the search's own
    barely = barely_met(one, prediction, req.ttft_slo_ms, req.tpot_slo_ms)
    if barely is not None:
        warnings.append(barely)
    if prediction.goodput_requests_per_second == 0:
        warnings.append(
            f"even a single request misses the SLO (predicted TTFT {one.ttft_p50 * 1e3:.0f} ms, "
            f"TPOT {one.tpot_p50 * 1e3:.1f} ms vs {req.ttft_slo_ms:g} / {req.tpot_slo_ms:g} ms); "
            "relax the SLO, shorten prompts, or use more TP (--objective latency) or a faster GPU"
        )
    params = req.arch.params
    return Plan(
        model=req.arch.name,
        gpu=req.gpu,
        engine=req.engine,
        engine_version=profile.version,
        engine_profile=profile.name,
        tensor_parallel_size=ev.layout.tp,
        pipeline_parallel_size=ev.layout.pp,
        gpus_per_replica=gpus,
        nodes_per_replica=math.ceil(gpus / per_node),
        memory_fraction=_settings(ctx, ev.layout, max_len).memory_fraction,
        max_model_len=max_len,
        max_num_seqs=max_seqs,
        max_num_batched_tokens=ctx.batched,
        long_prefill_token_threshold=replica.long_prefill_token_threshold,
        kv_cache_dtype=req.kv_cache_dtype,
        dtype=req.dtype,
        quantization=req.quantization or (fmt.method if fmt.method != "none" else None),
        kv_cache_tokens=ev.kv_tokens,
        kv_bytes_per_token=ev.kv_bytes_per_token,
        max_concurrency=ev.max_concurrency,
        weights_total_bytes=ev.weights_total,
        params_total=params.total,
        params_active=params.active,
        memory=ev.memory,
        predicted=prediction,
        reason=f"TP {ev.layout.tp} x PP {ev.layout.pp} = {gpus} GPU(s): {why}",
        warnings=tuple(warnings),
        request=req,
        expert_parallel=req.expert_parallel,
        lora=ctx.lora,
        speculative=_speculative_plan(ctx, ev, step, max_seqs),
    )


def _context(req: PlanRequest) -> _Context:
    fmt = weight_format(req.arch.quantization_config, req.dtype, req.quantization)
    batched_default, seqs_default = default_batch_limits(req.engine, req.gpu, req.engine_version)
    return _Context(
        req,
        engine_profile(req.engine, req.engine_version),
        fmt,
        kv_dtype_bytes(req.kv_cache_dtype, fmt.dtype_bytes),
        min(req.max_gpus_per_node or req.gpu.gpus_per_node, req.gpu.gpus_per_node),
        req.max_num_batched_tokens or batched_default,
        seqs_default,
        resolve(req.lora, req.engine) if req.lora is not None else None,
        req.speculative,
    )


class _Sized(NamedTuple):
    """A replica sized for the request, before its load runs."""

    ev: Evaluation
    max_len: int
    why: str
    warnings: list[str]
    considered: _Considered
    max_seqs: int
    step: Timer  # the target's StepModel, or with speculation its SpeculativeTimer
    slots: int
    replica: Replica
    prefill: int  # prompt tokens left to compute per request (after prefix-cache hits)


def _size(ctx: _Context, layouts: list[Layout]) -> _Sized:
    req = ctx.req
    ev, max_len, why, warnings, considered = _choose(ctx, layouts)
    request_tokens = min(req.input_tokens + req.output_tokens, max_len)
    max_seqs = req.max_num_seqs or _max_num_seqs(ctx, ev, request_tokens)
    if max_seqs != (req.max_num_seqs or ctx.max_seqs_default):
        settings = _settings(ctx, ev.layout, max_len)
        sized = evaluate(
            req.arch,
            req.gpu,
            ctx.profile,
            ctx.fmt,
            ev.layout,
            replace(settings, max_num_seqs=max_seqs),
        )
        if not _fits(sized, min(max_len, ev.kv_tokens)) and req.max_num_seqs is None:
            # More seats than _evaluate could afford: their sampler profile would not leave
            # the context room; render the fewest (what the layout was chosen with).
            max_seqs = _fewest_seqs(ctx)
            sized = evaluate(
                req.arch, req.gpu, ctx.profile, ctx.fmt, ev.layout,
                replace(settings, max_num_seqs=max_seqs),
            )  # fmt: skip
        ev = sized
    target = _step_model(ctx, ev)
    slots = min(max_seqs, ev.kv_tokens // max(request_tokens, 1))
    replica = Replica.of(
        req.engine, ev.kv_tokens, max_seqs, ctx.batched, max_len, ev.layout.pp, req.engine_version
    )
    if req.cap_long_prefills:
        threshold = long_prefill_threshold(target, ctx.batched, max_len, req.tpot_slo_ms / 1e3)
        replica = replace(replica, long_prefill_token_threshold=threshold)
    # Prefix-cache hits skip their prefill: the load runs on the tokens left to compute.
    prefill = prefill_tokens(req.input_tokens, req.prefix_cache_hit_rate)
    step: Timer = _speculative_timer(ctx, ev.layout, target) or target
    return _Sized(ev, max_len, why, warnings, considered, max_seqs, step, slots, replica, prefill)


def speculative_timer(req: PlanRequest, lay: Layout, target: StepModel) -> SpeculativeTimer | None:
    """The step timer of a planned replica with `req.speculative` (the simulator's)."""
    return _speculative_timer(_context(req), lay, target)


def _speculative_timer(ctx: _Context, lay: Layout, target: StepModel) -> SpeculativeTimer | None:
    """The target's steps with the proposer's (capacity/speculative.py SpeculativeTimer)."""
    sp = ctx.speculative
    if sp is None:
        return None
    draft = _draft(ctx, lay.tp)
    assert draft is not None
    arch = step_arch(draft, sp.method)
    draft_step = None
    if arch is not None:
        fmt = ctx.fmt if sp.method == "mtp" else weight_format({}, ctx.req.dtype, None)
        built = build_step_model(arch, ctx.req.gpu, lay.tp, 1, fmt, ctx.kv_bytes, ctx.per_node, 0.0)
        draft_step = draft_step_model(draft, built, fmt.dtype_bytes)
    proposer = 0.0
    if sp.method == "ngram" and engine_facts(ctx.req.engine).ngram_stops_async:
        # vLLM turns async scheduling off for the CPU n-gram proposer (vllm/config/vllm.py):
        # the step's CPU time it would have hidden is paid again.
        full = STEP_OVERHEAD_S
        proposer = full - ctx.profile.step_overhead_s(lay.pp)
    return SpeculativeTimer(target, draft_step, sp.num_speculative_tokens, sp.tokens_per_step,
                            proposer)  # fmt: skip


def _speculative_plan(
    ctx: _Context, ev: Evaluation, step: Timer, max_seqs: int
) -> SpeculativePlan | None:
    sp = ctx.speculative
    if sp is None or not isinstance(step, SpeculativeTimer):
        return None
    draft = _draft(ctx, ev.layout.tp)
    assert draft is not None
    context = ctx.req.input_tokens + ctx.req.output_tokens // 2
    return SpeculativePlan(
        method=sp.method,
        num_speculative_tokens=sp.num_speculative_tokens,
        acceptance_rate=sp.rate,
        rate_source=sp.rate_source,
        tokens_per_step=sp.tokens_per_step,
        draft_model=sp.draft_model,
        draft_weight_bytes=draft.weight_bytes,
        draft_kv_bytes_per_token=draft.kv_bytes_per_token,
        crossover_batch=crossover_batch(step, step.target, context, max(max_seqs, 1)),
        policy=sp.policy,
        passthrough=sp.passthrough,
    )


def _saturation_cost(req: PlanRequest) -> tuple[bool, float]:
    """The order cost_choice plans layouts in: those whose goodput search's first run
    passes first (their capacity is at least its rate: priced, they set the others' floors
    high), each group by GPU cost per 1M requests at the closed-loop saturation throughput.
    Only the runs plan() itself starts with (load.predict_under_load), cached: the full
    plan reuses them."""
    ctx = _context(req)
    s = _size(ctx, _candidates(req, ctx.per_node))
    ttft, tpot = req.ttft_slo_ms / 1e3, req.tpot_slo_ms / 1e3
    c, out = req.concurrency, req.output_tokens
    start = search_start(s.step, s.replica, c, s.prefill, out, s.slots, ttft, tpot)
    rps = start.saturation
    if rps <= 0:
        return True, math.inf
    passes = first_probe_passes(s.step, s.replica, s.prefill, out, ttft, tpot, start)
    return not passes, _gpus(s.ev) * req.gpu.price_per_hour / (rps * 3600) * 1e6


def _plan_fleet(req: PlanRequest, layouts: list[Layout], per_node: int) -> Plan:
    """--target-rps: plan one replica of every layout that fits a node (or, if none does,
    the smallest multi-node ones), size a fleet of each and keep the cheapest."""
    if req.target_requests_per_second is None or not req.target_requests_per_second > 0:
        raise PlanError(
            "target-rps", req.target_requests_per_second, "must be positive", "e.g. --target-rps 5"
        )
    single = [lay for lay in layouts if lay.tp * lay.pp <= per_node]
    tried = single or layouts[:3]
    plans: list[Plan] = []
    errors: list[PlanError] = []
    for lay in tried:
        sub = replace(
            req,
            tensor_parallel_size=lay.tp,
            pipeline_parallel_size=lay.pp,
            pipeline_auto=False,
            target_requests_per_second=None,
        )
        try:
            plans.append(plan(sub))
        except PlanError as e:
            errors.append(e)
    if not plans and single:  # nothing fits one node: try the multi-node layouts
        return _plan_fleet(replace(req, max_gpus_per_node=None), layouts[len(single) :], 0)
    if not plans:
        raise errors[-1]
    chosen, fleet = size_fleet(plans, req.target_requests_per_second, req.objective)
    return replace(
        chosen,
        fleet=fleet,
        reason=f"{chosen.reason.split(': ', 1)[0]}: {fleet.reason}",
        request=req,
    )


def _max_num_seqs(ctx: _Context, ev: Evaluation, request_tokens: int) -> int:
    """No more running sequences than the KV cache holds at the workload's length (more
    would only be preempted), but at least the target concurrency; capped at the default."""
    fit = ev.kv_tokens // max(request_tokens, 1)
    want = max(ctx.req.concurrency, fit)
    return max(1, min(ctx.max_seqs_default, math.ceil(want / 8) * 8))


def _warnings(ctx: _Context, ev: Evaluation, max_len: int) -> list[str]:
    out = []
    m, gpu = ev.memory, ctx.req.gpu
    facts = engine_facts(ctx.req.engine)
    if facts.profile_run and not m.cuda_graphs_in_budget:
        used = m.budget + m.cuda_graphs + CUDA_CONTEXT_GIB * GIB
        if used > gpu.memory_gib * GIB:
            out.append(
                f"budget {m.budget / GIB:.1f} GiB + CUDA graphs {m.cuda_graphs / GIB:.1f} GiB + "
                f"context exceed the {gpu.memory_gib} GiB of a {gpu.id}: startup may OOM; lower "
                "--gpu-memory-utilization"
            )
    if not facts.profile_run and ctx.req.memory_fraction is None:
        default = sglang_default_mem_fraction(
            gpu, ctx.batched, ev.layout.tp, ev.layout.pp, ctx.profile.version
        )
        if _memory_fraction(ctx, ev.layout) > default:
            out.append(
                f"SGLang's default mem-fraction-static {default:g} leaves no room for the "
                f"{m.weights / GIB:.1f} GiB of weights per GPU (its reserve is sized for dense "
                f"models); raised to {_memory_fraction(ctx, ev.layout):g}, keeping the "
                "activation peak, CUDA graphs and 2 GiB free (capacity/sglang_memory.py)"
            )
    if ctx.kv_bytes < 2 and ctx.req.kv_cache_dtype != "auto":
        out.append("fp8 KV cache: twice the tokens, small accuracy cost; validate on your evals")
    if 0 < m.kv_cache < SMALL_KV_SHARE * m.budget:
        # KV is what is left after weights and overheads: an overhead that is off by
        # OVERHEAD_UNCERTAINTY_GIB (engines.md: non-torch 2-3.5 GiB at TP >= 2, activations
        # 1.9-7.4 GiB by version) moves the KV tokens by that share of a small remainder.
        swing = OVERHEAD_UNCERTAINTY_GIB * GIB / m.kv_cache * 100
        out.append(
            f"the KV cache is a small remainder ({m.kv_cache / GIB:.1f} GiB of a "
            f"{m.budget / GIB:.1f} GiB budget): engine overheads vary by about "
            f"{OVERHEAD_UNCERTAINTY_GIB:g} GiB between versions and launch flags, i.e. "
            f"+/-{swing:.0f}% of these KV tokens; check the engine's logged KV size, or add a GPU"
        )
    if ev.layout.tp > ctx.req.arch.attention.kv_heads and not ctx.req.arch.attention.is_mla:
        out.append(
            f"TP {ev.layout.tp} > {ctx.req.arch.attention.kv_heads} KV heads: each rank "
            "replicates a KV head, so KV memory per token does not shrink past TP "
            f"{ctx.req.arch.attention.kv_heads}"
        )
    return out
