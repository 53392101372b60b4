"""The built-in capacity model: pure functions from (model, GPU, engine) to a sized replica.

arch = load_model("meta-llama/Llama-3.1-8B")
p = plan(PlanRequest(arch=arch, gpu=get_gpu("l4")))
p.tensor_parallel_size, p.kv_cache_tokens, p.predicted.ttft_ms
"""

from __future__ import annotations

from tokenfleet.capacity.architecture import ModelArch, parse_config
from tokenfleet.capacity.catalog import architecture_from_config, catalog_ids, load_model
from tokenfleet.capacity.errors import PlanError
from tokenfleet.capacity.gpus import GPU, GPUS, get_gpu
from tokenfleet.capacity.performance import EFFICIENCY, StepModel
from tokenfleet.capacity.planner import plan, valid_tp_sizes
from tokenfleet.capacity.types import MemoryBreakdown, Plan, PlanRequest, Prediction
from tokenfleet.scheduling.core import StepTimer

__all__ = [
    "EFFICIENCY",
    "GPU",
    "GPUS",
    "MemoryBreakdown",
    "ModelArch",
    "Plan",
    "PlanError",
    "PlanRequest",
    "Prediction",
    "StepModel",
    "architecture_from_config",
    "catalog_ids",
    "get_gpu",
    "load_model",
    "parse_config",
    "plan",
    "step_model",
    "step_timer",
    "valid_tp_sizes",
]


def step_model(p: Plan) -> StepModel:
    """Per-step timing of a planned replica (used by the simulator)."""
    from tokenfleet.capacity.engine_profiles import engine_profile
    from tokenfleet.capacity.kv import kv_dtype_bytes
    from tokenfleet.capacity.performance import build_step_model
    from tokenfleet.capacity.quantization import weight_format

    arch = p.request.arch if p.request else load_model(p.model)
    fmt = weight_format(arch.quantization_config, p.dtype, p.quantization)
    per_node = min(p.gpus_per_replica, p.gpu.gpus_per_node)
    if p.nodes_per_replica > 1:
        per_node = p.gpus_per_replica // p.nodes_per_replica
    return build_step_model(
        arch,
        p.gpu,
        p.tensor_parallel_size,
        p.pipeline_parallel_size,
        fmt,
        kv_dtype_bytes(p.kv_cache_dtype, fmt.dtype_bytes),
        per_node,
        engine_profile(p.engine, p.engine_version).step_overhead_s(p.pipeline_parallel_size),
    )


def step_timer(p: Plan) -> StepTimer:
    """The planned replica's step timer: its step model, with the speculative proposer's
    rounds when the plan runs one (capacity/speculative.py)."""
    from tokenfleet.capacity.memory import Layout
    from tokenfleet.capacity.planner import speculative_timer

    target = step_model(p)
    sp = p.speculative
    if sp is None or not sp.enabled or p.request is None:
        return target
    lay = Layout(p.tensor_parallel_size, p.pipeline_parallel_size)
    return speculative_timer(p.request, lay, target) or target
