"""Latency and throughput of one replica: a roofline with efficiencies in one table.

Prefill is compute-bound (FLOPs / achieved TFLOPS, floored by one pass over the weights);
decode is bandwidth-bound (weights + live KV read per step / achieved bandwidth, floored by
compute at large batches). Tensor parallelism adds two all-reduces per layer; pipeline
parallelism adds a hop per stage. Kernel efficiencies by GPU generation and weight format
live in kernels.py (one table, each entry with its source); interconnects in comm.py.

From the step model: TTFT, TPOT and throughput at a concurrency (closed loop, Little's law),
and the goodput capacity: the highest request rate whose TTFT and TPOT still meet the SLO.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from tokenfleet.capacity.architecture import ModelArch
from tokenfleet.capacity.comm import Comm, comm_for
from tokenfleet.capacity.gpus import GPU
from tokenfleet.capacity.kernels import (
    LAYER_LATENCY_S,
    MOE_KERNELS,
    RAMP_ROWS,
    SINK_FALLBACK,
    STEP_OVERHEAD_S,
    format_of,
    generation,
    kernel_for,
    moe_kernel_for,
    peak_tflops,
)
from tokenfleet.capacity.kv import layer_token_bytes
from tokenfleet.capacity.quantization import WeightFormat
from tokenfleet.capacity.types import Prediction

# The step model's constants live with their sources: kernel efficiencies by GPU generation
# and weight format in capacity/kernels.py, interconnects in capacity/comm.py. This view
# keeps the old name for callers that print them.
EFFICIENCY: dict[str, float] = {
    "step_overhead_s": STEP_OVERHEAD_S,
    "layer_latency_s": LAYER_LATENCY_S,
    **{f"moe_{fmt}_compute_scale": k.compute_scale for fmt, k in MOE_KERNELS.items()},
    **{f"moe_{fmt}_bandwidth_scale": k.bandwidth_scale for fmt, k in MOE_KERNELS.items()},
    **{f"moe_{fmt}_layer_latency_s": k.layer_latency_s for fmt, k in MOE_KERNELS.items()},
}
_BF16_MOE = MOE_KERNELS["bf16"]


@dataclass(frozen=True)
class StepModel:
    """Time of one engine step on one replica. Units: tokens, bytes and seconds.

    A step runs every layer of every pipeline stage in turn (one micro-batch), so per-rank
    quantities are summed over the stages.
    """

    dense_bytes: float  # non-expert weights one rank reads per step (all stages)
    expert_bytes: float  # one expert's weights on one rank, per MoE layer
    moe_layers: int
    experts: int
    experts_per_token: int
    dense_flops_per_token: float  # 2 x non-expert linear params / tp (no embedding / head)
    expert_flops_per_token: float  # 2 x routed expert params per token / tp
    head_flops_per_seq: float  # the LM head runs once per sequence that samples
    attn_flops_coeff: float  # per rank: attention FLOPs = coeff x (query, key) pairs
    kv_bytes_per_token_layer: float  # per rank, per layer
    full_layers: int
    sliding_layers: int
    window: int
    linear_tflops: float  # peak the linear layers' kernel runs at
    attention_tflops: float  # bf16 peak (attention stays bf16)
    compute_efficiency: float
    attention_efficiency: float
    bandwidth: float  # GB/s
    bandwidth_efficiency: float
    layers: int
    comm: Comm
    overhead_s: float = STEP_OVERHEAD_S  # engine CPU per step; 0 = GPU time only
    # The expert kernels of the experts' weight format (kernels.MOE_KERNELS): their compute
    # and bandwidth relative to the dense kernel's, the rows at which the expert GEMMs reach
    # half their large-M rate, the intermediate width per rank at which they reach half
    # their wide-shard rate, and their fixed latency per MoE layer inside a CUDA graph.
    moe_compute_scale: float = _BF16_MOE.compute_scale
    moe_bandwidth_scale: float = _BF16_MOE.bandwidth_scale
    expert_ramp_rows: float = _BF16_MOE.ramp_rows
    moe_layer_latency_s: float = _BF16_MOE.layer_latency_s
    expert_width: float = 0.0  # an expert's intermediate size per rank; 0: no width term
    expert_ramp_width: float = _BF16_MOE.ramp_width

    def __post_init__(self) -> None:
        # Constants of every step_seconds call, computed once: plan()'s virtual runs time
        # thousands of steps (frozen dataclass: set around __setattr__; not fields, so
        # equality and hashing still see only the inputs above).
        setter = object.__setattr__
        setter(self, "_bw", self.bandwidth * 1e9 * self.bandwidth_efficiency)
        setter(self, "_peak", self.linear_tflops * 1e12 * self.compute_efficiency)
        setter(self, "_attn_rate", self.attention_tflops * 1e12 * self.attention_efficiency)
        latency = self.layers * LAYER_LATENCY_S
        if self.moe_layers:
            latency += self.moe_layers * self.moe_layer_latency_s
        setter(self, "_latency", latency)
        # The rest of step_seconds' per-layout constants, each the value the expression it
        # stands for evaluates first (so the result is the same to the bit).
        setter(self, "_moe_bw", self._bw * self.moe_bandwidth_scale)  # type: ignore[attr-defined]
        width = self.expert_width
        narrow = width / (width + self.expert_ramp_width) if width else 1.0
        setter(self, "_moe_peak", self._peak * self.moe_compute_scale * narrow)  # type: ignore[attr-defined]
        miss = 1 - self.experts_per_token / self.experts if self.moe_layers else 0.0
        setter(self, "_expert_miss", miss)
        sliding = self.sliding_layers and self.window
        f = self.sliding_layers / (self.sliding_layers + self.full_layers) if sliding else 0.0
        setter(self, "_sliding_share", f)
        setter(self, "_comm_lines", self.comm.lines())

    @property
    def tp(self) -> int:
        return self.comm.tp

    @property
    def pp(self) -> int:
        return self.comm.pp

    def _touched_experts(self, tokens: int) -> float:
        """Distinct experts a batch of `tokens` routes to, per MoE layer (uniform routing)."""
        return self.experts * (1 - (1 - self.experts_per_token / self.experts) ** tokens)

    def _kv_read(self, seqs: int, context_tokens: int) -> float:
        avg = context_tokens / seqs if seqs else 0
        sliding_ctx = min(avg, self.window) if self.window else avg
        per_seq = self.full_layers * avg + self.sliding_layers * sliding_ctx
        return seqs * per_seq * self.kv_bytes_per_token_layer

    def step_seconds(
        self,
        prefill_tokens: int,
        decode_seqs: int,
        decode_context_tokens: int,
        prefill_attention_pairs: float | None = None,
        prefill_seqs: int = 1,
    ) -> float:
        """One scheduler step: `prefill_tokens` of prompt (chunked prefill) plus one token for
        each of `decode_seqs` running sequences whose contexts total `decode_context_tokens`.

        `prefill_attention_pairs` is the attention work of the prefill pieces: for each
        sequence's chunk of c tokens after k already computed, c*c/2 + c*k. Default: one
        sequence prefilled from scratch (prefill_tokens**2 / 2).
        """
        tokens = prefill_tokens + decode_seqs
        if tokens <= 0:
            return 0.0
        # plan()'s hottest call (thousands per plan): per-layout constants come from
        # __post_init__, _kv_read, _touched_experts and Comm.seconds are inlined.
        bw: float = self._bw  # type: ignore[attr-defined]
        peak: float = self._peak  # type: ignore[attr-defined]
        kv_read = 0.0
        if decode_seqs:
            avg = decode_context_tokens / decode_seqs
            window = self.window
            # Conditional expressions, not min() / max() calls (same values, same types).
            sliding_ctx = (window if window < avg else avg) if window else avg
            per_seq = self.full_layers * avg + self.sliding_layers * sliding_ctx
            kv_read = decode_seqs * per_seq * self.kv_bytes_per_token_layer
        memory_s = (self.dense_bytes + kv_read) / bw
        # ramp(rows) = rows / (rows + RAMP_ROWS), inlined.
        compute_s = self.dense_flops_per_token * tokens / (peak * tokens / (tokens + RAMP_ROWS))
        sampling = decode_seqs + (prefill_seqs if prefill_tokens else 0)
        if sampling > 0:
            compute_s += (
                self.head_flops_per_seq * sampling / (peak * sampling / (sampling + RAMP_ROWS))
            )
        if self.moe_layers:
            touched = self.experts * (1 - self._expert_miss**tokens)  # type: ignore[attr-defined]
            memory_s += self.moe_layers * touched * self.expert_bytes / self._moe_bw  # type: ignore[attr-defined]
            rows = tokens * self.experts_per_token / (1.0 if touched < 1.0 else touched)
            compute_s += (
                self.expert_flops_per_token
                * tokens
                / (self._moe_peak * rows / (rows + self.expert_ramp_rows))  # type: ignore[attr-defined]
            )
        latency_s: float = self._latency  # type: ignore[attr-defined]
        pairs = prefill_tokens * prefill_tokens / 2
        if prefill_attention_pairs is not None:
            pairs = prefill_attention_pairs
        context = float(decode_context_tokens)
        f: float = self._sliding_share  # type: ignore[attr-defined]
        if f:
            # Sliding-window layers attend to at most `window` keys per query.
            window = self.window
            cap = prefill_tokens * window
            pairs = (1 - f) * pairs + f * (cap if cap < pairs else pairs)
            cap = decode_seqs * window
            context = (1 - f) * context + f * (cap if cap < context else context)
        attn = self.attn_flops_coeff * (pairs + context)
        attn_rate: float = self._attn_rate  # type: ignore[attr-defined]
        compute_s += attn / attn_rate
        lines: tuple[int, float, float, float, float] = self._comm_lines  # type: ignore[attr-defined]
        switch, small_fixed, small_per, large_fixed, large_per = lines
        comm_s = (
            small_fixed + small_per * tokens
            if tokens <= switch
            else large_fixed + large_per * tokens
        )
        slowest = compute_s if compute_s > memory_s else memory_s
        return slowest + latency_s + comm_s + self.overhead_s

    def prefill_seconds(self, num_tokens: int, chunk: int | None = None) -> float:
        """Prefill of one prompt alone, in chunks of `chunk` tokens (None: one step)."""
        if num_tokens <= 0:
            return 0.0
        size = chunk or num_tokens
        total, done = 0.0, 0
        while done < num_tokens:
            n = min(size, num_tokens - done)
            total += self.step_seconds(n, 0, 0, n * n / 2 + n * done)
            done += n
        return total

    def decode_step_seconds(self, batch: int, total_context_tokens: int) -> float:
        return self.step_seconds(0, batch, total_context_tokens)


def build_step_model(
    arch: ModelArch,
    gpu: GPU,
    tp: int,
    pp: int,
    fmt: WeightFormat,
    kv_bytes: float,
    per_node: int | None = None,
    overhead_s: float = STEP_OVERHEAD_S,
) -> StepModel:
    """The step model of a (TP, PP) layout of `arch` on `gpu` with weights in `fmt`."""
    p = arch.params
    kernel = kernel_for(gpu, format_of(fmt.method, fmt.linear_bytes, fmt.dtype_bytes))
    moe = moe_kernel_for(format_of(fmt.method, fmt.bytes_for("experts"), fmt.dtype_bytes))
    attn_kernel = kernel_for(gpu, "bf16")
    attention_efficiency = attn_kernel.compute
    if arch.model_type.startswith("gpt_oss") and generation(gpu) in SINK_FALLBACK:
        # Attention sinks: FlashAttention 2 has none, so pre-Hopper GPUs run a slower backend.
        attention_efficiency *= SINK_FALLBACK[generation(gpu)]
    moe_layers = arch.layers - arch.moe.first_dense_layers if arch.moe else 0
    expert_bytes = 0.0
    if arch.moe and moe_layers:
        expert_bytes = p.experts / (moe_layers * arch.moe.experts) * fmt.bytes_for("experts") / tp
    head = p.lm_head or p.embedding
    dense_bytes = (
        p.attention * fmt.bytes_for("attention")
        + p.dense_mlp * fmt.bytes_for("dense_mlp")
        + p.shared_experts_and_router * fmt.bytes_for("shared_experts_and_router")
        + (p.norms + head) * fmt.dtype_bytes
    ) / tp
    dense_linear = p.attention + p.dense_mlp + p.shared_experts_and_router
    a = arch.attention
    qk_dim = (a.qk_nope_head_dim + a.qk_rope_head_dim) if a.is_mla else a.head_dim
    v_dim = a.v_head_dim if a.is_mla else a.head_dim
    attn_coeff = 2 * arch.layers * (a.heads / tp) * (qk_dim + v_dim)
    return StepModel(
        dense_bytes=dense_bytes,
        expert_bytes=expert_bytes,
        moe_layers=moe_layers,
        experts=arch.moe.experts if arch.moe else 0,
        experts_per_token=arch.moe.experts_per_token if arch.moe else 0,
        dense_flops_per_token=2 * dense_linear / tp,
        expert_flops_per_token=2 * p.active_experts / tp,
        head_flops_per_seq=2 * head / tp,
        attn_flops_coeff=attn_coeff,
        kv_bytes_per_token_layer=layer_token_bytes(arch, tp, kv_bytes),
        full_layers=arch.num_full_layers,
        sliding_layers=arch.num_sliding_layers,
        window=arch.sliding_window,
        linear_tflops=peak_tflops(gpu, kernel.peak),
        attention_tflops=gpu.bf16_tflops,
        compute_efficiency=kernel.compute,
        attention_efficiency=attention_efficiency,
        bandwidth=gpu.bandwidth_gbps,
        bandwidth_efficiency=kernel.bandwidth,
        layers=arch.layers,
        comm=comm_for(gpu, tp, pp, per_node or gpu.gpus_per_node, arch.hidden, arch.layers),
        overhead_s=overhead_s,
        moe_compute_scale=moe.compute_scale,
        moe_bandwidth_scale=moe.bandwidth_scale,
        expert_ramp_rows=moe.ramp_rows,
        moe_layer_latency_s=moe.layer_latency_s,
        expert_width=arch.moe.expert_intermediate / tp if arch.moe else 0.0,
        expert_ramp_width=moe.ramp_width,
    )


@dataclass(frozen=True)
class Workload:
    concurrency: int
    input_tokens: int
    output_tokens: int
    chunk: int  # max_num_batched_tokens


def latency_at(model: StepModel, w: Workload, concurrency: int) -> tuple[float, float]:
    """(TTFT, TPOT) in seconds at a steady closed-loop concurrency."""
    c = max(concurrency, 1)
    avg_context = w.input_tokens + w.output_tokens / 2
    decode = model.decode_step_seconds(c, int(c * avg_context))
    # Every running request was prefilled once; spread over its output tokens, that is
    # c / output_tokens prefills per decode step, each costing its compute time.
    prefill_alone = model.prefill_seconds(w.input_tokens, w.chunk)
    prefill_extra = model.step_seconds(w.input_tokens, 0, 0) - model.step_seconds(1, 0, 0)
    tpot = decode + (c - 1) / max(w.output_tokens, 1) * max(prefill_extra, 0.0)
    chunks = math.ceil(w.input_tokens / max(w.chunk, 1))
    ttft = prefill_alone + (chunks * decode if c > 1 else 0.0)
    return ttft, tpot


def predict(
    model: StepModel,
    w: Workload,
    max_concurrency: int,
    gpus: int,
    price_per_gpu_hour: float,
    ttft_slo_s: float,
    tpot_slo_s: float,
) -> Prediction:
    ttft, tpot = latency_at(model, w, w.concurrency)
    e2e = ttft + max(w.output_tokens - 1, 0) * tpot
    rps = w.concurrency / e2e if e2e else 0.0
    tokens_s = rps * w.output_tokens
    good_c = _goodput_concurrency(model, w, max_concurrency, ttft_slo_s, tpot_slo_s)
    good_rps = 0.0
    if good_c:
        g_ttft, g_tpot = latency_at(model, w, good_c)
        good_rps = good_c / (g_ttft + max(w.output_tokens - 1, 0) * g_tpot)
    cost = gpus * price_per_gpu_hour / (tokens_s * 3600) * 1e6 if tokens_s else math.inf
    return Prediction(
        ttft_ms=ttft * 1e3,
        tpot_ms=tpot * 1e3,
        output_tokens_per_second=tokens_s,
        requests_per_second=rps,
        goodput_requests_per_second=good_rps,
        goodput_concurrency=good_c,
        cost_per_million_output_tokens=cost,
    )


def _goodput_concurrency(
    model: StepModel, w: Workload, limit: int, ttft_slo_s: float, tpot_slo_s: float
) -> int:
    """Largest concurrency <= limit whose TTFT and TPOT meet the SLO (0 if none)."""

    def ok(c: int) -> bool:
        ttft, tpot = latency_at(model, w, c)
        return ttft <= ttft_slo_s and tpot <= tpot_slo_s

    if limit < 1 or not ok(1):
        return 0
    lo, hi = 1, limit  # latency grows with concurrency: bisect for the last c that is ok
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if ok(mid):
            lo = mid
        else:
            hi = mid - 1
    return lo
