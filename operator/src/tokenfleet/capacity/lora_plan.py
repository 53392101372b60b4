"""The planner's LoRA step: the slot count chosen within the memory the workload leaves, and
the refusal of slots that leave no KV cache for one request.

`plan()` runs this around its own sizing when the request has adapters: with the slot count
given it plans once and, if nothing fits, says whether the slots are the reason; with the
slot count left to it, it tries the default (capacity/lora.py default_slots) and halves it
while what it leaves falls short: a KV cache that holds fewer than the workload's requests
(concurrency x (input + output) tokens), or a max-model-len the plan had to lower below the
one it has without adapters; down to the pinned adapters' count.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from tokenfleet.capacity.errors import PlanError
from tokenfleet.capacity.lora import LoraRequest, LoraSlots, buffer_bytes, resolve
from tokenfleet.capacity.quantization import weight_format
from tokenfleet.capacity.types import GIB, Plan, PlanRequest

PlanFn = Callable[[PlanRequest], Plan]


def _refusal(req: PlanRequest, lr: LoraRequest, slots: LoraSlots, plan_fn: PlanFn) -> PlanError:
    """The slots leave no KV cache for one request of max-model-len (the plan without them
    fits), named on the fields that set them."""
    bare = plan_fn(replace(req, lora=None))
    fmt = weight_format(req.arch.quantization_config, req.dtype, req.quantization)
    size = buffer_bytes(
        req.arch,
        slots,
        req.engine,
        bare.tensor_parallel_size,
        bare.pipeline_parallel_size,
        fmt.dtype_bytes,
        req.expert_parallel,
    )
    return PlanError(
        lr.slots_field,
        slots.slots,
        f"{slots.slots} adapter slot(s) at rank {slots.max_rank} take {size / GIB:.2f} GiB per "
        f"GPU, which leaves no KV cache for one request of max-model-len "
        f"{bare.max_model_len:,} (without them the KV cache holds {bare.kv_cache_tokens:,} "
        "tokens)",
        f"lower it or {lr.rank_field}, or plan more GPUs per replica",
    )


def plan_with_adapters(req: PlanRequest, plan_fn: PlanFn) -> Plan:
    lr = req.lora
    assert lr is not None
    first = resolve(lr, req.engine)  # refuses bad settings before anything is sized
    floor = max(lr.pinned, 1)
    need = req.concurrency * (req.input_tokens + req.output_tokens)
    slots = first.slots
    fitted: Plan | None = None
    longest = 0  # max-model-len without adapters: defaults must not lower it
    if first.chosen:
        try:
            longest = plan_fn(replace(req, lora=None)).max_model_len
        except PlanError:
            longest = 0
    while True:
        try:
            p = plan_fn(replace(req, lora=replace(lr, slots=slots, max_rank=first.max_rank)))
        except PlanError as error:
            if first.chosen and slots > floor:
                slots = max(floor, slots // 2)
                continue
            try:
                refusal = _refusal(req, lr, replace(first, slots=slots), plan_fn)
            except PlanError:
                raise error from None  # it fits nowhere, LoRA or not: the planner's reason
            raise refusal from None
        fitted = p
        enough = p.kv_cache_tokens >= need and p.max_model_len >= longest
        if not first.chosen or enough or slots <= floor:
            break
        slots = max(floor, slots // 2)
    assert fitted is not None
    chosen = fitted.lora
    assert chosen is not None
    chosen = replace(chosen, chosen=first.chosen, adapters=lr.adapters)
    warnings = list(fitted.warnings)
    if first.chosen and chosen.slots < lr.adapters:
        warnings.append(
            f"{chosen.slots} GPU slot(s) for {lr.adapters} adapters (lora-slots chosen so that "
            f"the KV cache still holds the workload's {need:,} tokens): the others take turns "
            "in the slots, loaded from CPU memory when a request needs them; set lora-slots to "
            "keep more on the GPU"
        )
    return replace(fitted, lora=chosen, warnings=tuple(warnings))
