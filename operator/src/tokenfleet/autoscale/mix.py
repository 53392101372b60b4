"""Capacity from the observed request mix: plan()'s goodput at the length distribution. PURE.

plan() predicts a replica's goodput for one prompt / output length (the spec's nominal
workload). Real traffic is a mix: on Azure 2023 "conv" the goodput at the mean lengths is
2.8x what a replica serves, because a 3,500-token prompt costs far more than 3.5 prompts
of 1,000 (prefill is superlinear, and it blocks the requests behind it). Each class of the
prompt-length histogram gets plan()'s goodput at its representative length (the bucket's
midpoint; the engines export no per-bucket sum) and the mean output length (exact:
_sum / _count); a replica spends 1 / goodput seconds per request of a class, so the mix's
capacity is the harmonic mean weighted by the classes' shares. Classes no replica serves
within the SLO (goodput 0: their prefill alone breaks it) are left out: they are the
ceiling's business (attainability.py), not capacity's.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from tokenfleet.autoscale.attainability import LengthHistogram

MIN_SHARE = 0.002  # classes rarer than this do not get a plan() of their own


@dataclass(frozen=True)
class MixCapacity:
    requests_per_second: float
    """Per replica, within the SLO, for the observed mix (0: no class is servable)."""
    classes: tuple[tuple[int, float, float], ...]
    """(representative prompt tokens, share, plan goodput) per class planned."""


def mix_capacity(
    prompts: LengthHistogram, output_tokens: int, goodput: Callable[[int, int], float]
) -> MixCapacity | None:
    """`goodput(prompt, output)`: plan()'s goodput_requests_per_second at those lengths."""
    total = prompts.total
    if total <= 0:
        return None
    classes: list[tuple[int, float, float]] = []
    seconds, share_served = 0.0, 0.0
    for i, count in enumerate(prompts.counts):
        share = count / total
        if share < MIN_SHARE:
            continue
        lower = prompts.bounds[i - 1] if i else 0.0
        upper = prompts.bounds[i] if i < len(prompts.bounds) else prompts.top
        if upper == float("inf"):
            continue  # an unbounded +Inf bucket has no length to plan at
        tokens = max(1, round((lower + upper) / 2))
        rate = goodput(tokens, max(1, output_tokens))
        classes.append((tokens, share, rate))
        if rate > 0:
            seconds += share / rate
            share_served += share
    if seconds <= 0:
        return MixCapacity(0.0, tuple(classes))
    return MixCapacity(share_served / seconds, tuple(classes))
