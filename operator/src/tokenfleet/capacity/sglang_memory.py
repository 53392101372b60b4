"""SGLang on large GPUs: when its default mem_fraction_static cannot hold the weights.

SGLang's default (sglang 0.5.23, srt/arg_groups/memory_hook.py handle_gpu_memory_settings;
engine_profiles.sglang_default_mem_fraction restates it) reserves 512 MB + 1.5 MB per token
of chunked_prefill_size + 2 MB per decode CUDA-graph batch + tp x pp / 8 GB, at least 10 GB
above 60 GB. On 141-192 GB GPUs the chunk is 16384 tokens (B200, MI300X: "gpu_mem >= 160
GB"), so 26 GB are held back for activations, graphs and slack: the DeepSeek-R1 FP8 weights
at TP 4 on a B200 (157 GiB a GPU) do not fit its 152 GiB, yet AIConfigurator's runs with
SGLang 0.5.9 started it. A forward pass over 16384 tokens of DeepSeek needs a few GiB, not
24: the 1.5 MB-a-token heuristic is sized for dense models with wide MLPs.

So when the default leaves no room for one request, the planner raises the fraction (and
renders it as --mem-fraction-static) to what the weights need, keeping the activation peak of
a forward over the chunk (memory.activation_bytes), the CUDA graphs and HEADROOM_GIB free.
A fraction the user set is never changed.
"""

from __future__ import annotations

import math
from dataclasses import replace

from tokenfleet.capacity.architecture import ModelArch
from tokenfleet.capacity.engine_profiles import EngineProfile
from tokenfleet.capacity.gpus import GPU
from tokenfleet.capacity.memory import (
    Layout,
    Settings,
    activation_bytes,
    cuda_graph_bytes,
    evaluate,
)
from tokenfleet.capacity.quantization import WeightFormat
from tokenfleet.capacity.types import GIB

HEADROOM_GIB = 2.0  # allocator fragmentation and the sampler's buffers
MAX_FRACTION = 0.95


def fraction_for(
    arch: ModelArch,
    gpu: GPU,
    profile: EngineProfile,
    fmt: WeightFormat,
    layout: Layout,
    s: Settings,
    request_tokens: int,
) -> float:
    """s.memory_fraction (SGLang's default) if it holds the weights and one request of
    `request_tokens`; else the larger fraction that leaves only the activation peak, the
    CUDA graphs and HEADROOM_GIB outside (never lower than the default, at most 0.95)."""
    ev = evaluate(arch, gpu, profile, fmt, layout, s)
    if ev.memory.kv_cache > 0 and ev.kv_tokens >= request_tokens:
        return s.memory_fraction
    act = activation_bytes(arch, profile, layout.tp, s, True, min(fmt.dtype_bytes, 2.0))
    graphs = cuda_graph_bytes(math.ceil(arch.layers / layout.pp), layout.tp)
    total = gpu.memory_gib * GIB
    free = (total - act - graphs - HEADROOM_GIB * GIB) / total
    raised = min(MAX_FRACTION, math.floor(free * 100) / 100)
    if raised <= s.memory_fraction:
        return s.memory_fraction
    return (
        raised
        if evaluate(arch, gpu, profile, fmt, layout, replace(s, memory_fraction=raised)).kv_tokens
        > 0
        else s.memory_fraction
    )
