"""Prefix caching in the capacity model: the prompt tokens a replica must prefill. Pure.

vLLM's automatic prefix caching and SGLang's RadixAttention keep the KV of prompt prefixes
(shared system prompts, the earlier turns of a chat) and skip their prefill when a new
request starts with them; an endpoint picker with prefix affinity (spec.routing) sends a
request to the replica that holds its prefix. A hit rate h (the share of prompt tokens
found in the cache) leaves input x (1 - h) tokens to compute. Only the prefill work
shrinks: the KV cache still holds the whole context of every running request, so memory,
max-model-len and the concurrency a replica holds are planned on the full prompt.

Since only prefill gets cheaper, a replica's throughput rises by 1 / (1 - p x h), p the
prefill share of its work on the request mix (measured at saturation, where decode steps
are shared by the whole batch): a prefill-heavy workload (long prompts, short answers)
gains most, a decode-heavy one hardly at all. Goodput can gain more than throughput: a
shorter prefill also shortens the TTFT of every request queued behind it.
"""

from __future__ import annotations

import math


def prefill_tokens(input_tokens: int, hit_rate: float) -> int:
    """Prompt tokens computed per request (the rest are prefix-cache hits); at least 1:
    even a full hit computes the last token to start decoding."""
    return max(1, math.ceil(input_tokens * (1.0 - hit_rate) - 1e-9))  # 1000 x 0.05 is 50


def prefill_share(full_rps: float, decode_only_rps: float) -> float:
    """The prefill share p of a replica's work on this request mix: from its saturation
    throughput with the whole prompt to compute and with a 1-token prompt (decode alone),
    both from the planner's scheduler run: 1 / full = P + D, 1 / decode_only = D."""
    if full_rps <= 0 or decode_only_rps <= 0:
        return 0.0
    return min(1.0, max(0.0, 1.0 - full_rps / decode_only_rps))


def max_gain(share: float, hit_rate: float) -> float:
    """The most a hit rate can multiply capacity by: only the prefill share shrinks."""
    return 1.0 / (1.0 - share * hit_rate)


LEAD = "prefix cache: "


def explain(input_tokens: int, hit_rate: float, share: float) -> str:
    """The sentence the plan's explanation gains with a hit rate."""
    return (
        f"{LEAD}{hit_rate:.0%} of the {input_tokens:,}-token prompts are cache hits, "
        f"so a request prefills {prefill_tokens(input_tokens, hit_rate):,} tokens; prefill is "
        f"{share:.0%} of a replica's work on this mix, so its throughput rises up to "
        f"{max_gain(share, hit_rate):.2f}x (less where the batch limit or the SLO, not the "
        "work, bounds it)"
    )


def carried(reason: str) -> str:
    """The prefix-cache sentence of a plan's reason ("" if none), for a caller that
    rewrites the reason of a plan it chose (the cost objective) and must keep it."""
    _, found, rest = reason.partition(f"; {LEAD}")
    return f"; {LEAD}{rest}" if found else ""
