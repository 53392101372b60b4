"""spec.engine.simulate: the engine container becomes `tokenfleet sim`, sized by the same
plan, with no GPU request, so the whole loop (plan, rollout, Service, PodMonitor,
autoscaler) can be tried on a cluster without GPUs such as kind.

The simulator speaks the engine's HTTP API and exports its metric names, and times each
request with the capacity model for the planned GPU, so the autoscaler sees what it would
see on that GPU. It runs one process per replica, so a plan whose replica spans nodes is
refused rather than rendered differently from what the GPUs would run. Pure.
"""

from __future__ import annotations

from typing import Any

from tokenfleet.api import LLMService
from tokenfleet.capacity.catalog import load_model
from tokenfleet.capacity.types import Plan
from tokenfleet.engines import engine_info
from tokenfleet.errors import UserError
from tokenfleet.render.adapters import static_adapters
from tokenfleet.render.meta import CACHE_MOUNT

# The simulator is one small asyncio process: what it needs, requested, not a GPU node's.
RESOURCES: dict[str, Any] = {
    "requests": {"cpu": "250m", "memory": "256Mi"},
    "limits": {"memory": "1Gi"},
}


SIM_USER: dict[str, Any] = {"runAsNonRoot": True, "runAsUser": 10001}


def check_simulate(service: LLMService, plan: Plan) -> None:
    """Refuse what the simulator cannot stand in for (names the field and the fix)."""
    if not service.spec.engine.simulate:
        return
    if plan.nodes_per_replica > 1:
        raise UserError(
            "spec.engine.simulate",
            True,
            f"a replica of this plan spans {plan.nodes_per_replica} nodes and the simulator "
            "runs one pod per replica",
            "simulate a model whose replica fits one node (a smaller model or a larger GPU)",
        )
    fetched = [a.name for a in service.spec.adapters if a.scheme == "s3" or a.revision]
    if fetched:
        raise UserError(
            "spec.engine.simulate",
            True,
            f"adapter {fetched[0]} is fetched by an init step (s3:// or a pinned Hub revision) "
            "that the simulator's pod has no tools for",
            "simulate with pvc:// or hf:// sources without a revision",
        )
    model = service.spec.model
    try:
        load_model(model.id, "spec.model.id")
    except UserError:
        raise UserError(
            "spec.engine.simulate",
            True,
            f"the simulator reads the model's architecture from the built-in catalog and "
            f"{model.id!r} is not in it",
            "simulate a catalog model (tokenfleet models)",
        ) from None


def sim_args(service: LLMService, plan: Plan) -> list[str]:
    """`tokenfleet sim` arguments that reproduce the planned replica."""
    spec = service.spec
    args = [
        "--engine", plan.engine,
        "--engine-version", plan.engine_version,
        "--gpu", plan.gpu.id,
        "--model", spec.model.id,
        "--served-model-name", spec.model.effective_served_name,
        "--tp", str(plan.tensor_parallel_size),
        "--pp", str(plan.pipeline_parallel_size),
        "--max-model-len", str(plan.max_model_len),
        "--max-num-seqs", str(plan.max_num_seqs),
        "--max-num-batched-tokens", str(plan.max_num_batched_tokens),
        "--kv-cache-tokens", str(plan.kv_cache_tokens),
        "--kv-cache-dtype", plan.kv_cache_dtype,
        "--host", "0.0.0.0",
        "--port", str(engine_info(plan.engine).port),
    ]  # fmt: skip
    if spec.model.quantization:
        args += ["--quantization", spec.model.quantization]
    if plan.long_prefill_token_threshold:
        args += ["--long-prefill-token-threshold", str(plan.long_prefill_token_threshold)]
    if plan.lora is not None:
        args += [
            "--enable-lora",
            "--max-loras", str(plan.lora.slots),
            "--max-lora-rank", str(plan.lora.max_rank),
        ]  # fmt: skip
        static = static_adapters(service, CACHE_MOUNT)
        if static:
            args += ["--lora-modules", *(f"{a.name}={a.path}" for a in static)]
    return args


def simulated(container: dict[str, Any], service: LLMService, plan: Plan) -> dict[str, Any]:
    """The engine container, running the simulator instead of the engine."""
    out = dict(container)
    out["image"] = service.spec.engine.image_for(plan.engine_version)
    out["command"] = ["tokenfleet", "sim"]
    out["args"] = sim_args(service, plan)
    out["resources"] = {k: dict(v) for k, v in RESOURCES.items()}
    # The engine-sim image runs as uid 10001: say so, and the pod passes Pod Security
    # "restricted" without the user setting a securityContext.
    out["securityContext"] = {**container["securityContext"], **SIM_USER}
    return out
