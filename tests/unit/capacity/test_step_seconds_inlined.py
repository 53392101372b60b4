"""StepModel.step_seconds inlines its helpers and precomputes its per-layout constants
(plan()'s hottest call): the same step time, to the bit, as the plain formula built from
those helpers, over catalog models, GPUs, layouts and step shapes (prefill chunks, decode
batches, mixed steps, sliding windows, MoE, TP and PP comm on both sides of its switch)."""

from __future__ import annotations

import pytest

from tokenfleet.capacity import catalog_ids, get_gpu, load_model, valid_tp_sizes
from tokenfleet.capacity.kernels import RAMP_ROWS
from tokenfleet.capacity.performance import StepModel, build_step_model
from tokenfleet.capacity.quantization import weight_format


def plain_step_seconds(
    m: StepModel,
    prefill_tokens: int,
    decode_seqs: int,
    decode_context_tokens: int,
    prefill_attention_pairs: float | None = None,
    prefill_seqs: int = 1,
) -> float:
    """The step model as written before the inlining, helper calls and all."""
    tokens = prefill_tokens + decode_seqs
    if tokens <= 0:
        return 0.0
    bw = m.bandwidth * 1e9 * m.bandwidth_efficiency
    peak = m.linear_tflops * 1e12 * m.compute_efficiency
    memory_s = (m.dense_bytes + m._kv_read(decode_seqs, decode_context_tokens)) / bw
    compute_s = m.dense_flops_per_token * tokens / (peak * tokens / (tokens + RAMP_ROWS))
    sampling = decode_seqs + (prefill_seqs if prefill_tokens else 0)
    if sampling > 0:
        compute_s += m.head_flops_per_seq * sampling / (peak * sampling / (sampling + RAMP_ROWS))
    if m.moe_layers:
        touched = m._touched_experts(tokens)
        memory_s += m.moe_layers * touched * m.expert_bytes / (bw * m.moe_bandwidth_scale)
        rows = tokens * m.experts_per_token / max(touched, 1.0)
        w = m.expert_width
        narrow = w / (w + m.expert_ramp_width) if w else 1.0
        compute_s += (
            m.expert_flops_per_token
            * tokens
            / (peak * m.moe_compute_scale * narrow * rows / (rows + m.expert_ramp_rows))
        )
    pairs = prefill_tokens * prefill_tokens / 2
    if prefill_attention_pairs is not None:
        pairs = prefill_attention_pairs
    context = float(decode_context_tokens)
    if m.sliding_layers and m.window:
        f = m.sliding_layers / (m.sliding_layers + m.full_layers)
        pairs = (1 - f) * pairs + f * min(pairs, prefill_tokens * m.window)
        context = (1 - f) * context + f * min(context, decode_seqs * m.window)
    attn = m.attn_flops_coeff * (pairs + context)
    compute_s += attn / (m.attention_tflops * 1e12 * m.attention_efficiency)
    return max(memory_s, compute_s) + m._latency + m.comm.seconds(tokens) + m.overhead_s  # type: ignore[attr-defined]


SHAPES = [
    (0, 0, 0, None),
    (1, 0, 0, None),
    (2048, 0, 0, None),
    (1024, 0, 0, 1024 * 1024 / 2 + 1024 * 1024.0),
    (0, 1, 2048, None),
    (0, 16, 16 * 2348, None),
    (0, 257, 564886, None),
    (0, 1024, 1024 * 9000, None),
    (2048, 15, 15 * 2200, None),
    (300, 61, 61 * 70, 300 * 300 / 2 + 300 * 700.0),
    (8192, 200, 200 * 128, None),
    (65536, 3, 3 * 100_000, None),
]


def _models() -> list[tuple[str, StepModel]]:
    out = []
    for model in catalog_ids():
        arch = load_model(model)
        for gpu_name in ("l4", "h100-sxm", "b200"):
            gpu = get_gpu(gpu_name)
            fmt = weight_format(arch.quantization_config, "auto", None)
            for tp, pp in ((1, 1), (2, 1), (8, 1), (4, 2), (8, 4)):
                if tp not in valid_tp_sizes(arch, 8):
                    continue
                step = build_step_model(arch, gpu, tp, pp, fmt, 2.0, per_node=8)
                out.append((f"{model}/{gpu_name}/tp{tp}pp{pp}", step))
    return out


MODELS = _models()


@pytest.mark.parametrize("name,step", MODELS, ids=[n for n, _ in MODELS])
def test_inlined_step_seconds_is_the_plain_formula_to_the_bit(name: str, step: StepModel) -> None:
    for prefill, seqs, context, pairs in SHAPES:
        for prefill_seqs in (1, 4):
            got = step.step_seconds(prefill, seqs, context, pairs, prefill_seqs)
            want = plain_step_seconds(step, prefill, seqs, context, pairs, prefill_seqs)
            assert got == want, (name, prefill, seqs, context, pairs, prefill_seqs)


def test_the_table_covers_every_branch() -> None:
    steps = [s for _, s in MODELS]
    assert any(s.moe_layers for s in steps) and any(not s.moe_layers for s in steps)
    assert any(s.sliding_layers and s.window for s in steps)
    assert any(s.comm.tp > 1 for s in steps) and any(s.comm.pp > 1 for s in steps)
    # Both of Comm's lines are reached: some step's tokens lie past its switch.
    top = max(p + d for p, d, _, _ in SHAPES)
    assert any(0 < s.comm.lines()[0] < top for s in steps if s.comm.tp > 1)
