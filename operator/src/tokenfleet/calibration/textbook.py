"""The textbook memory formula of reference/seed-capacity-formula.md, reproduced exactly.

It is the baseline the engine-aware model improves on: it counts activations for the whole
sequence at once and ignores the engine's paging, graphs and overheads. `--breakdown
textbook` shows it next to the plan. Where the source's prose disagrees with its own formula
(attention activations: "about 10 GB" stated, 5 GiB computed for its 405B example) we show
the formula's value and say so.
"""

from __future__ import annotations

from dataclasses import dataclass

from tokenfleet.capacity.architecture import ModelArch


@dataclass(frozen=True)
class TextbookRow:
    part: str
    formula: str
    bytes: int


@dataclass(frozen=True)
class TextbookBreakdown:
    rows: tuple[TextbookRow, ...]
    notes: tuple[str, ...]

    @property
    def total_bytes(self) -> int:
        return sum(r.bytes for r in self.rows if not r.part.startswith("KV cache, context"))

    @property
    def total_with_context_bytes(self) -> int:
        """Total when the KV cache is sized for the full context window instead."""
        return sum(r.bytes for r in self.rows if r.part != "KV cache, request")


def textbook(
    arch: ModelArch,
    batch: int,
    input_tokens: int,
    output_tokens: int,
    context: int,
    bytes_per_param: int = 2,
) -> TextbookBreakdown:
    b, h, L = bytes_per_param, arch.hidden, arch.layers
    a = arch.attention
    seq = input_tokens + output_tokens
    params = arch.params.total

    def kv(tokens: int) -> int:
        return batch * b * L * a.head_dim * a.kv_heads * tokens * 2

    attention = batch * b * seq * h * 5
    kv_formula = "batch x bytes x layers x head_dim x kv_heads x {} x 2"
    rows = (
        TextbookRow("parameters", "bytes x params", b * params),
        TextbookRow("KV cache, request", kv_formula.format(seq), kv(seq)),
        TextbookRow("KV cache, context", kv_formula.format(context), kv(context)),
        TextbookRow("attention activations", f"batch x bytes x {seq} x hidden x 5", attention),
        TextbookRow("FFN activations", f"batch x bytes x {seq} x (2 hidden + 2 intermediate)",
                    batch * b * seq * (2 * h + 2 * arch.intermediate)),
        TextbookRow("input + output data", f"batch x bytes x {context}", batch * b * context),
    )  # fmt: skip
    notes = [
        "the source states 'about 10 GB' of attention activations for its Llama 3.1 405B "
        "example; its formula (batch x bytes x seq x hidden x 5) gives "
        f"{4 * 2 * 8192 * 16384 * 5 / 1024**3:.1f} GiB there"
        + (f" and {attention / 1024**3:.2f} GiB here" if attention else ""),
        "activations are counted for one layer at a time (buffers are reused across layers)",
        "the textbook ignores the engine's paging, CUDA graphs, non-torch memory and memory "
        "fraction; `tokenfleet plan` without --breakdown models those",
    ]
    if arch.attention.is_mla or arch.is_hybrid:
        notes.append(
            "this model uses MLA or sliding-window layers: the textbook KV line overstates it"
        )
    return TextbookBreakdown(rows, tuple(notes))
