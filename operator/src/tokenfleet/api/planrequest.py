"""LLMService -> capacity PlanRequest: the one place spec fields meet the planner's inputs.

Pure: the caller resolves a configMapRef (reads the ConfigMap) and passes its config.json
mapping in. Errors name the spec field (spec.gpu.tensorParallelSize): a UserError for the
spec itself, a PlanError where the planner refuses it.

The CLI shares two things with it: `check_cli_bounds` holds `tokenfleet plan`'s flags to
the CRD's own bounds (read from the pydantic models, never retyped), and
`capacity.validate.check_request` runs on both paths with each one's names for the inputs.
`spec_error` renames the planner's CLI-worded errors (max-model-len, --tp) into spec fields.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

import annotated_types
from pydantic import BaseModel

from tokenfleet.api.adapters import LoraSpec
from tokenfleet.api.engine import EngineSpec
from tokenfleet.api.gpu import AUTO, GpuSpec
from tokenfleet.api.spec import LLMService
from tokenfleet.api.workload import SloSpec, WorkloadSpec
from tokenfleet.capacity.architecture import ModelArch, parse_config
from tokenfleet.capacity.catalog import load_model
from tokenfleet.capacity.disagg.request import ServingRequest
from tokenfleet.capacity.disagg.rules import check_pair, check_version
from tokenfleet.capacity.errors import PlanError
from tokenfleet.capacity.gpu_choice import OFFERS, GpuCandidate
from tokenfleet.capacity.gpus import get_gpu
from tokenfleet.capacity.lora import LoraRequest
from tokenfleet.capacity.speculative import SpeculativeRequest
from tokenfleet.capacity.types import Plan, PlanRequest
from tokenfleet.capacity.validate import check_request
from tokenfleet.errors import UserError

# CLI flag (argparse dest) -> the spec field with the same meaning (model, attribute).
CLI_FLAG_FIELDS: dict[str, tuple[type[BaseModel], str]] = {
    "concurrency": (WorkloadSpec, "concurrency"),
    "input_tokens": (WorkloadSpec, "input_tokens"),
    "output_tokens": (WorkloadSpec, "output_tokens"),
    "prefix_hit_rate": (WorkloadSpec, "prefix_cache_hit_rate"),
    "max_model_len": (WorkloadSpec, "max_model_len"),
    "target_rps": (WorkloadSpec, "target_requests_per_second"),
    "ttft_slo_ms": (SloSpec, "ttft_ms"),
    "tpot_slo_ms": (SloSpec, "tpot_ms"),
    "max_num_seqs": (EngineSpec, "max_num_seqs"),
    "max_num_batched_tokens": (EngineSpec, "max_num_batched_tokens"),
    "gpu_memory_utilization": (EngineSpec, "memory_fraction"),
    "mem_fraction_static": (EngineSpec, "memory_fraction"),
    "price_per_gpu_hour": (GpuSpec, "price_per_hour"),
    "tp": (GpuSpec, "tensor_parallel_size"),
    "pp": (GpuSpec, "pipeline_parallel_size"),
    "max_gpus_per_node": (GpuSpec, "max_per_node"),
    # No spec field: a replica spans one node per pipeline stage at most, so --max-nodes
    # takes the bounds of spec.gpu.pipelineParallelSize.
    "max_nodes": (GpuSpec, "pipeline_parallel_size"),
    "lora_slots": (LoraSpec, "max_loras"),
    "lora_rank": (LoraSpec, "max_rank"),
}

# The spec field behind each input the planner's errors and fixes name in CLI words.
SPEC_FIELDS: dict[str, str] = {
    "model": "spec.model.id",
    "dtype": "spec.model.dtype",
    "quantization": "spec.model.quantization",
    "gpu": "spec.gpu.type",
    "tp": "spec.gpu.tensorParallelSize",
    "pp": "spec.gpu.pipelineParallelSize",
    "max-gpus-per-node": "spec.gpu.maxPerNode",
    "price-per-gpu-hour": "spec.gpu.pricePerHour",
    "engine": "spec.engine.kind",
    "engine-version": "spec.engine.version",
    "gpu-memory-utilization": "spec.engine.memoryFraction",
    "mem-fraction-static": "spec.engine.memoryFraction",
    "max-num-seqs": "spec.engine.maxNumSeqs",
    "max-num-batched-tokens": "spec.engine.maxNumBatchedTokens",
    "kv-cache-dtype": "spec.engine.kvCacheDtype",
    "expert-parallel": "spec.engine.expertParallel",
    "cap-long-prefills": "spec.engine.capLongPrefills",
    "max-model-len": "spec.workload.maxModelLen",
    "concurrency": "spec.workload.concurrency",
    "input-tokens": "spec.workload.inputTokens",
    "output-tokens": "spec.workload.outputTokens",
    "prefix-hit-rate": "spec.workload.prefixCacheHitRate",
    "ttft-slo-ms": "spec.slo.ttftMs",
    "tpot-slo-ms": "spec.slo.tpotMs",
    "lora-slots": "spec.lora.maxLoras",
    "lora-rank": "spec.lora.maxRank",
    "serving": "spec.serving.mode",
    "kv-link": "spec.serving.kvLink",
    "kv-network-gbps": "spec.serving.networkGbps",
    "transfer-backend": "spec.serving.transferBackend",
    "prefill-tp": "spec.serving.prefill.tensorParallelSize",
    "decode-tp": "spec.serving.decode.tensorParallelSize",
}
SPEC_NAMES: dict[str, str] = {
    "input_tokens": SPEC_FIELDS["input-tokens"],
    "output_tokens": SPEC_FIELDS["output-tokens"],
    "max_model_len": SPEC_FIELDS["max-model-len"],
    "engine_version": SPEC_FIELDS["engine-version"],
    "quantization": SPEC_FIELDS["quantization"],
    "expert_parallel": SPEC_FIELDS["expert-parallel"],
    "cap_long_prefills": SPEC_FIELDS["cap-long-prefills"],
}


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part.title() for part in rest)


def check_cli_bounds(values: Mapping[str, Any]) -> None:
    """Hold CLI flags (argparse dests -> values; None = unset) to the bounds the CRD puts on
    the same spec fields, so `tokenfleet plan` accepts exactly what an LLMService may say."""
    for dest, value in values.items():
        if value is None or dest not in CLI_FLAG_FIELDS:
            continue
        model, attribute = CLI_FLAG_FIELDS[dest]
        section = model.__name__.removesuffix("Spec").lower()
        spec_field = f"spec.{section}.{_camel(attribute)}"
        for bound in model.model_fields[attribute].metadata:
            problem = _violated(bound, value)
            if problem:
                flag = dest.replace("_", "-")
                raise UserError(
                    flag,
                    value,
                    f"{problem} (the CRD's bound on {spec_field})",
                    f"pass --{flag} {problem.removeprefix('must be ')}",
                )


def max_replicas() -> int:
    """The most replicas an LLMService can run: the CRD's bound on spec.autoscaling.maxReplicas."""
    from tokenfleet.api.autoscaling import AutoscalingSpec

    field = AutoscalingSpec.model_fields["max_replicas"]
    return min(int(str(b.le)) for b in field.metadata if isinstance(b, annotated_types.Le))


def check_fleet_size(planned: Plan, field: str = "target-rps") -> None:
    """A target rate no LLMService can serve (more replicas than the CRD allows) is refused
    rather than planned: `--target-rps 1e9` must not answer with billions of GPUs."""
    fleet = planned.fleet
    if fleet is None or fleet.chosen.replicas <= (limit := max_replicas()):
        return
    per_replica = fleet.chosen.goodput_requests_per_second
    raise PlanError(
        field,
        f"{fleet.target_requests_per_second:g}",
        f"needs {fleet.chosen.replicas:,} replicas ({fleet.chosen.total_gpus:,} GPUs), more "
        f"than the {limit:,} one LLMService runs (spec.autoscaling.maxReplicas)",
        f"lower it to {per_replica * limit:,.0f} req/s or less, or split the traffic over "
        "several LLMServices",
    )


def _violated(bound: object, value: Any) -> str | None:
    if isinstance(bound, annotated_types.Ge) and not value >= bound.ge:
        return f"must be >= {bound.ge}"
    if isinstance(bound, annotated_types.Gt) and not value > bound.gt:
        return f"must be > {bound.gt}"
    if isinstance(bound, annotated_types.Le) and not value <= bound.le:
        return f"must be <= {bound.le:,}"
    if isinstance(bound, annotated_types.Lt) and not value < bound.lt:
        return f"must be < {bound.lt}"
    return None


_FLAG = re.compile(r"--([a-z][a-z0-9-]*)")


def spec_text(text: str) -> str:
    """`--max-model-len` -> `spec.workload.maxModelLen` in a message; others unchanged."""
    # The CLI's `--pp auto` has no spec counterpart: a spec asks for stages by number.
    text = text.replace("(--pp auto or --pp N)", "(--pp N)")
    return _FLAG.sub(lambda m: SPEC_FIELDS.get(m.group(1), m.group(0)), text)


def spec_error(error: UserError) -> UserError:
    """The planner words its errors for the CLI (`max-model-len=...; raise --max-model-len`);
    for an LLMService, name the spec fields instead. Unknown names are left as they are."""
    if error.field.startswith("spec.") or error.field not in SPEC_FIELDS:
        field = error.field
    else:
        field = SPEC_FIELDS[error.field]
    rename = spec_text
    if field == error.field and rename(error.fix) == error.fix:
        return error
    kind = PlanError if isinstance(error, PlanError) else UserError
    renamed = kind(field, error.value, rename(error.problem), rename(error.fix))
    renamed.__cause__ = error
    return renamed


def plan_service(request: PlanRequest) -> Plan:
    """capacity.plan for a request made from an LLMService: errors name spec fields."""
    from tokenfleet.capacity.planner import plan

    try:
        planned = plan(request)
        check_fleet_size(planned, "spec.workload.targetRequestsPerSecond")
    except UserError as error:
        if request.gpu_candidates and error.field == "gpu":  # no candidate can serve it
            error = PlanError("spec.gpu.candidates", error.value, error.problem, error.fix)
        raise spec_error(error) from None
    # Warnings land in status.plan.warnings: word them for the YAML too.
    return dataclasses.replace(planned, warnings=tuple(map(spec_text, planned.warnings)))


def to_plan_request(service: LLMService, config: Mapping[str, Any] | None = None) -> PlanRequest:
    """`config` is the model's config.json when the caller resolved spec.model.configMapRef
    (or any other source); an inline spec.model.config wins over it."""
    spec = service.spec
    candidates = _candidates(service)
    tp, pp = _parallelism(service, candidates)
    if candidates:
        gpu = candidates[0].gpu
    else:
        gpu = get_gpu(spec.gpu.type, field="spec.gpu.type").with_price(spec.gpu.price_per_hour)
    arch = _architecture(service, config)
    request = PlanRequest(
        arch=arch,
        gpu=gpu,
        gpu_candidates=candidates,
        engine=spec.engine.kind,
        engine_version=spec.engine.version,
        tensor_parallel_size=tp,
        pipeline_parallel_size=pp,
        memory_fraction=spec.engine.memory_fraction,
        max_model_len=spec.workload.max_model_len,
        max_num_batched_tokens=spec.engine.max_num_batched_tokens,
        max_num_seqs=spec.engine.max_num_seqs,
        kv_cache_dtype=spec.engine.kv_cache_dtype,
        dtype=spec.model.dtype,
        quantization=spec.model.quantization,
        expert_parallel=spec.engine.expert_parallel,
        cap_long_prefills=spec.engine.cap_long_prefills,
        concurrency=spec.workload.concurrency,
        input_tokens=spec.workload.input_tokens,
        output_tokens=spec.workload.output_tokens,
        prefix_cache_hit_rate=spec.workload.prefix_cache_hit_rate,
        ttft_slo_ms=spec.slo.ttft_ms,
        tpot_slo_ms=spec.slo.tpot_ms,
        max_gpus_per_node=spec.gpu.max_per_node,
        target_requests_per_second=spec.workload.target_requests_per_second,
        lora=lora_request(service),
        serving=_serving(service, arch),
    )
    request = replace(request, speculative=speculative_spec_request(service, request))
    check_request(request, SPEC_NAMES)
    return request


def speculative_spec_request(
    service: LLMService, request: PlanRequest
) -> SpeculativeRequest | None:
    """spec.engine.speculative (the engine's own keys) as the planner takes it."""
    from tokenfleet.engines.speculative import NATIVE_KEYS, read_native, speculative_request

    engine = service.spec.engine
    if not engine.speculative:
        return None
    field = "spec.engine.speculative"
    method, tokens, draft_ref, rest = read_native(engine.kind, engine.speculative, field)
    tokens_key, model_key = NATIVE_KEYS[engine.kind]
    fields = (
        field,
        f"{field}.{tokens_key}",
        "spec.engine.speculativeAcceptanceRate",
        f"{field}.{model_key}",
    )
    return speculative_request(
        engine.kind,
        engine.version,
        method,
        tokens,
        request.arch,
        acceptance_rate=engine.speculative_acceptance_rate,
        draft_ref=draft_ref,
        draft_config=engine.speculative_draft_config,
        policy=engine.speculative_policy,
        passthrough=rest,
        fields=fields,
    )


def lora_request(service: LLMService) -> LoraRequest | None:
    """spec.adapters and spec.lora as the planner takes them; None: LoRA off."""
    spec = service.spec
    if not spec.lora_enabled:
        return None
    lora = spec.lora
    return LoraRequest(
        adapters=len(spec.adapters),
        ranks=tuple(a.rank for a in spec.adapters if a.rank is not None),
        pinned=sum(a.pinned for a in spec.adapters),
        slots=lora.max_loras if lora else None,
        max_rank=lora.max_rank if lora else None,
        max_cpu_loras=lora.max_cpu_loras if lora else None,
        target_modules=tuple(lora.target_modules or ()) if lora else (),
        slots_field="spec.lora.maxLoras",
        rank_field="spec.lora.maxRank",
    )


def _serving(service: LLMService, arch: ModelArch) -> ServingRequest:
    """spec.serving, with the constraints of the engines' KV connectors checked where the
    spec fixes them (the engine version, a fixed pair of role TP sizes)."""
    s, engine = service.spec.serving, service.spec.engine
    if s.mode == "disaggregated":
        check_version(engine.kind, engine.version, "spec.engine.version")
    p, d = s.prefill.tensor_parallel_size, s.decode.tensor_parallel_size
    if s.mode != "aggregated" and p is not None and d is not None:
        check_pair(arch, engine.kind, engine.version, p, d, s.transfer_backend,
                   "spec.serving.decode.tensorParallelSize")  # fmt: skip
    return ServingRequest(
        mode=s.mode,
        link=s.kv_link,
        network_gbit=s.network_gbps,
        prefill_tp=p,
        decode_tp=d,
        backend=s.transfer_backend,
    )


def _architecture(service: LLMService, config: Mapping[str, Any] | None) -> ModelArch:
    model = service.spec.model
    if model.config is not None:
        return parse_config(model.config, model.id, "spec.model.config")
    if config is not None:
        ref = model.config_map_ref
        source = f"ConfigMap {ref.name} key {ref.key}" if ref else "spec.model config.json"
        return parse_config(config, model.id, source)
    if model.config_map_ref is not None:
        ref = model.config_map_ref
        raise UserError(
            "spec.model.configMapRef",
            f"{ref.name}/{ref.key}",
            "the ConfigMap's config.json was not resolved",
            "create the ConfigMap with that key (the operator reads it before planning)",
        )
    # A CR must not make the operator read files from its own disk, so only catalog ids
    # are looked up here (load_model also accepts paths, for the CLI).
    if model.id.endswith(".json") or model.id.startswith(("/", ".", "~")):
        raise UserError(
            "spec.model.id",
            model.id,
            "looks like a file path; the operator only knows catalog ids",
            "use a Hugging Face id and put the config.json in spec.model.config or configMapRef",
        )
    try:
        return load_model(model.id, field="spec.model.id")
    except UserError as e:
        raise UserError(
            e.field,
            e.value,
            e.problem,
            f"{e.fix.split('; or ')[0]}; or give its config.json in spec.model.config "
            "or spec.model.configMapRef",
        ) from None


def _candidates(service: LLMService) -> tuple[GpuCandidate, ...]:
    """spec.gpu.type auto: the types to choose from: spec.gpu.candidates, else the operator's
    offers (capacity/gpu_choice.OFFERS). A candidate's price and maxCount default to the
    offer's for its type, then to the catalog's price."""
    gpu = service.spec.gpu
    if gpu.type != AUTO:
        return ()
    offers = {o.gpu.id: o for o in OFFERS}
    if not gpu.candidates:
        if not offers:
            raise UserError(
                "spec.gpu.candidates",
                "[]",
                "type auto chooses among candidates, and neither the spec nor the operator "
                "(its GPU offers) lists any",
                "list them, e.g. candidates: [{type: l40s}, {type: h100-sxm}]",
            )
        return tuple(OFFERS)
    out = []
    for i, c in enumerate(gpu.candidates):
        offer = offers.get(c.type)
        base = offer.gpu if offer else get_gpu(c.type, field=f"spec.gpu.candidates[{i}].type")
        count = c.max_count if c.max_count is not None else (offer.max_count if offer else None)
        out.append(GpuCandidate(base.with_price(c.price_per_hour), count))
    return tuple(out)


def _parallelism(
    service: LLMService, candidates: tuple[GpuCandidate, ...] = ()
) -> tuple[int | None, int | None]:
    """Fold gpu.count into TP / PP: the planner takes TP and PP, count = TP x PP."""
    gpu = service.spec.gpu
    tp, pp, count = gpu.tensor_parallel_size, gpu.pipeline_parallel_size, gpu.count
    if count is None:
        return tp, pp
    if tp is not None and pp is not None:
        if tp * pp != count:
            raise UserError(
                "spec.gpu.tensorParallelSize",
                tp,
                f"tensorParallelSize {tp} x pipelineParallelSize {pp} != count {count}",
                "make them agree or leave one unset",
            )
        return tp, pp
    if tp is not None:
        if count % tp:
            raise UserError(
                "spec.gpu.tensorParallelSize",
                tp,
                f"does not divide spec.gpu.count={count}",
                "use a divisor of count or leave tensorParallelSize unset",
            )
        return tp, count // tp
    if pp is not None:
        if count % pp:
            raise UserError(
                "spec.gpu.pipelineParallelSize",
                pp,
                f"does not divide spec.gpu.count={count}",
                "use a divisor of count or leave pipelineParallelSize unset",
            )
        return count // pp, pp
    # count alone: tensor parallel inside a node, pipeline stages across nodes.
    node = min(c.gpu.gpus_per_node for c in candidates) if candidates else None
    per_node = min(node or get_gpu(gpu.type).gpus_per_node, gpu.max_per_node or count)
    if count <= per_node:
        return count, 1
    if count % per_node:
        raise UserError(
            "spec.gpu.count",
            count,
            f"spans nodes but is not a multiple of the {per_node} GPUs per node",
            f"use a multiple of {per_node}, or set tensorParallelSize and pipelineParallelSize",
        )
    return per_node, count // per_node
