"""Latency and throughput of one replica: a roofline with efficiencies in one table.

Prefill is compute-bound (FLOPs / achieved TFLOPS, floored by one pass over the weights);
decode is bandwidth-bound (weights + live KV read per step / achieved bandwidth, floored by
compute at large batches). Tensor parallelism adds two all-reduces per layer; pipeline
parallelism adds a hop per stage. Every constant that is a guess lives in EFFICIENCY.

From the step model: TTFT, TPOT and throughput at a concurrency (closed loop, Little's law),
and the goodput capacity: the highest request rate whose TTFT and TPOT still meet the SLO.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from tokenfleet.capacity.architecture import ModelArch
from tokenfleet.capacity.gpus import GPU
from tokenfleet.capacity.kv import layer_token_bytes
from tokenfleet.capacity.types import Prediction

EFFICIENCY: dict[str, float] = {
    "prefill_compute": 0.55,  # fraction of dense peak TFLOPS a prefill reaches
    "decode_compute": 0.40,  # fraction of peak once decode batches become compute-bound
    "decode_bandwidth": 0.75,  # fraction of HBM bandwidth a decode step reaches
    "moe_compute_scale": 0.5,  # grouped-GEMM expert kernels reach about half the dense MFU
    "step_overhead_s": 0.0012,  # scheduler + kernel launch per step (with CUDA graphs)
    "allreduce_latency_s": 8e-6,  # per all-reduce on NVLink; x4 on PCIe
    "pp_hop_latency_s": 30e-6,  # activation hand-off between pipeline stages
}


@dataclass(frozen=True)
class StepModel:
    """Time of one engine step on one replica. Units: tokens and seconds."""

    weight_bytes_rank: float  # weights one rank reads per decode step (dense part)
    expert_bytes_rank: float  # one expert's weights on one rank, per MoE layer
    moe_layers: int
    experts: int
    experts_per_token: int
    flops_per_token_rank: float  # 2 x active params / (tp)
    attn_flops_coeff: float  # per rank: attention FLOPs = coeff x tokens x context
    kv_bytes_per_token_layer: float  # per rank, per layer
    full_layers: int
    sliding_layers: int
    window: int
    tflops: float
    bandwidth: float
    tp: int
    pp: int
    hidden: int
    layers: int
    pcie: bool
    compute_scale: float = 1.0

    def _compute_s(self, flops: float, efficiency: float) -> float:
        return flops / (self.tflops * 1e12 * efficiency * self.compute_scale)

    def _weights_read(self, tokens: int) -> float:
        if not self.moe_layers:
            return self.weight_bytes_rank
        # Distinct experts a batch of `tokens` routes to, per MoE layer.
        touched = self.experts * (1 - (1 - self.experts_per_token / self.experts) ** tokens)
        return self.weight_bytes_rank + self.moe_layers * touched * self.expert_bytes_rank

    def _comm_s(self, tokens: int) -> float:
        s = 0.0
        if self.tp > 1:
            latency = EFFICIENCY["allreduce_latency_s"] * (4 if self.pcie else 1)
            s += 2 * self.layers * latency  # two all-reduces per layer, every stage in turn
        if self.pp > 1:
            s += (self.pp - 1) * EFFICIENCY["pp_hop_latency_s"]
        return s

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
        memory = self._weights_read(tokens) + self._kv_read(decode_seqs, decode_context_tokens)
        memory_s = memory / (self.bandwidth * 1e9 * EFFICIENCY["decode_bandwidth"])
        pairs = prefill_tokens * prefill_tokens / 2
        if prefill_attention_pairs is not None:
            pairs = prefill_attention_pairs
        flops = self.flops_per_token_rank * tokens
        flops += self.attn_flops_coeff * (pairs + decode_context_tokens)
        efficiency = (
            EFFICIENCY["prefill_compute"] if prefill_tokens else EFFICIENCY["decode_compute"]
        )
        compute_s = self._compute_s(flops, efficiency)
        return max(memory_s, compute_s) + self._comm_s(tokens) + EFFICIENCY["step_overhead_s"]

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
    weights_rank: float,
    kv_bytes: float,
    compute_fp8: bool,
) -> StepModel:
    p = arch.params
    moe_layers = 0
    expert_rank = 0.0
    dense_weights = weights_rank * pp  # a decode token passes through every stage
    if arch.moe:
        moe_layers = arch.layers - arch.moe.first_dense_layers
        expert_rank = p.experts / (moe_layers * arch.moe.experts) / tp
        bytes_per_param = weights_rank * tp * pp / max(p.total, 1)
        expert_rank *= bytes_per_param
        dense_weights -= moe_layers * arch.moe.experts * expert_rank
    dense_weights -= p.embedding * 2 / tp  # the embedding is a lookup, not a full read
    a = arch.attention
    qk_dim = (a.qk_nope_head_dim + a.qk_rope_head_dim) if a.is_mla else a.head_dim
    v_dim = a.v_head_dim if a.is_mla else a.head_dim
    attn_coeff = 2 * arch.layers * (a.heads / tp) * (qk_dim + v_dim)
    return StepModel(
        weight_bytes_rank=max(dense_weights, 0.0),
        expert_bytes_rank=expert_rank,
        moe_layers=moe_layers,
        experts=arch.moe.experts if arch.moe else 0,
        experts_per_token=arch.moe.experts_per_token if arch.moe else 0,
        flops_per_token_rank=2 * p.active / tp,
        attn_flops_coeff=attn_coeff,
        kv_bytes_per_token_layer=layer_token_bytes(arch, tp, kv_bytes),
        full_layers=arch.num_full_layers,
        sliding_layers=arch.num_sliding_layers,
        window=arch.sliding_window,
        tflops=gpu.fp8_tflops if compute_fp8 else gpu.bf16_tflops,
        bandwidth=gpu.bandwidth_gbps,
        tp=tp,
        pp=pp,
        hidden=arch.hidden,
        layers=arch.layers,
        pcie=gpu.interconnect.startswith("PCIe"),
        compute_scale=EFFICIENCY["moe_compute_scale"] if arch.moe else 1.0,
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
