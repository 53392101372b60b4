"""LLMService -> capacity PlanRequest: the one place spec fields meet the planner's inputs.

Pure: the caller resolves a configMapRef (reads the ConfigMap) and passes its config.json
mapping in. Errors are PlanErrors naming the spec field (spec.gpu.tensorParallelSize).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tokenfleet.api.spec import LLMService
from tokenfleet.capacity.architecture import ModelArch, parse_config
from tokenfleet.capacity.catalog import load_model
from tokenfleet.capacity.errors import PlanError
from tokenfleet.capacity.gpus import get_gpu
from tokenfleet.capacity.types import PlanRequest


def to_plan_request(service: LLMService, config: Mapping[str, Any] | None = None) -> PlanRequest:
    """`config` is the model's config.json when the caller resolved spec.model.configMapRef
    (or any other source); an inline spec.model.config wins over it."""
    spec = service.spec
    tp, pp = _parallelism(service)
    gpu = get_gpu(spec.gpu.type, field="spec.gpu.type").with_price(spec.gpu.price_per_hour)
    return PlanRequest(
        arch=_architecture(service, config),
        gpu=gpu,
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
        concurrency=spec.workload.concurrency,
        input_tokens=spec.workload.input_tokens,
        output_tokens=spec.workload.output_tokens,
        ttft_slo_ms=spec.slo.ttft_ms,
        tpot_slo_ms=spec.slo.tpot_ms,
        max_gpus_per_node=spec.gpu.max_per_node,
        target_requests_per_second=spec.workload.target_requests_per_second,
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
        raise PlanError(
            "spec.model.configMapRef",
            f"{ref.name}/{ref.key}",
            "the ConfigMap's config.json was not resolved",
            "create the ConfigMap with that key (the operator reads it before planning)",
        )
    # A CR must not make the operator read files from its own disk, so only catalog ids
    # are looked up here (load_model also accepts paths, for the CLI).
    if model.id.endswith(".json") or model.id.startswith(("/", ".", "~")):
        raise PlanError(
            "spec.model.id",
            model.id,
            "looks like a file path; the operator only knows catalog ids",
            "use a Hugging Face id and put the config.json in spec.model.config or configMapRef",
        )
    try:
        return load_model(model.id, field="spec.model.id")
    except PlanError as e:
        raise PlanError(
            e.field,
            e.value,
            e.problem,
            f"{e.fix.split('; or ')[0]}; or give its config.json in spec.model.config "
            "or spec.model.configMapRef",
        ) from None


def _parallelism(service: LLMService) -> tuple[int | None, int | None]:
    """Fold gpu.count into TP / PP: the planner takes TP and PP, count = TP x PP."""
    gpu = service.spec.gpu
    tp, pp, count = gpu.tensor_parallel_size, gpu.pipeline_parallel_size, gpu.count
    if count is None:
        return tp, pp
    if tp is not None and pp is not None:
        if tp * pp != count:
            raise PlanError(
                "spec.gpu.tensorParallelSize",
                tp,
                f"tensorParallelSize {tp} x pipelineParallelSize {pp} != count {count}",
                "make them agree or leave one unset",
            )
        return tp, pp
    if tp is not None:
        if count % tp:
            raise PlanError(
                "spec.gpu.tensorParallelSize",
                tp,
                f"does not divide spec.gpu.count={count}",
                "use a divisor of count or leave tensorParallelSize unset",
            )
        return tp, count // tp
    if pp is not None:
        if count % pp:
            raise PlanError(
                "spec.gpu.pipelineParallelSize",
                pp,
                f"does not divide spec.gpu.count={count}",
                "use a divisor of count or leave pipelineParallelSize unset",
            )
        return count // pp, pp
    # count alone: tensor parallel inside a node, pipeline stages across nodes.
    per_node = min(get_gpu(gpu.type).gpus_per_node, gpu.max_per_node or count)
    if count <= per_node:
        return count, 1
    if count % per_node:
        raise PlanError(
            "spec.gpu.count",
            count,
            f"spans nodes but is not a multiple of the {per_node} GPUs per node",
            f"use a multiple of {per_node}, or set tensorParallelSize and pipelineParallelSize",
        )
    return per_node, count // per_node
