"""Step times of a known shape for the scheduler tests: every term the engines' step model
has (fixed overhead, prompt tokens, decode sequences, context read, attention pairs), each
with its own weight, so a test can make one of them dominate and check what follows."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Roofline:
    overhead: float
    per_prefill_token: float
    per_decode_seq: float = 0.0
    per_context_token: float = 0.0
    per_attention_pair: float = 0.0
    context_power: float = 1.0  # above 1, decode steps grow faster than the context

    def step_seconds(
        self,
        prefill_tokens: int,
        decode_seqs: int,
        decode_context_tokens: int,
        prefill_attention_pairs: float | None = None,
    ) -> float:
        pairs = prefill_tokens * prefill_tokens / 2
        if prefill_attention_pairs is not None:
            pairs = prefill_attention_pairs
        return (
            self.overhead
            + self.per_prefill_token * prefill_tokens
            + self.per_decode_seq * decode_seqs
            + self.per_context_token * decode_context_tokens**self.context_power
            + self.per_attention_pair * pairs
        )
