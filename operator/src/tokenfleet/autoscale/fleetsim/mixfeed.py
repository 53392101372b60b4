"""The feed-forward capacity the operator would compute from the observed mix, in replay:
the prompt histogram in the engine's buckets with its exact mean, the mean output, the
ceiling's longest attainable prompt (autoscale/mix.py), re-planned only on drift as the
operator does (controller/attainability.py)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from tokenfleet.autoscale.attainability import LengthHistogram
from tokenfleet.autoscale.fleetsim.observed import MIX_WINDOW_S
from tokenfleet.autoscale.mix import drifted, mix_capacity


@dataclass
class MixFeed:
    goodput: Callable[[int, int], float]
    """plan()'s goodput at (prompt, output) tokens, the layout pinned to the planned one."""
    bounds: tuple[float, ...]
    max_model_len: int
    _last: tuple[float, float, int] | None = field(default=None, init=False)
    _capacity: float | None = field(default=None, init=False)

    def capacity(
        self, prompts: Sequence[int], outputs: Sequence[int], longest: int, now: float
    ) -> float | None:
        """None until the window is full: a window opened at the start holds the short
        outputs (they finish first) and not yet the long ones (bursty: a mean output of
        132 tokens where the trace's is 164, a capacity 17% over)."""
        if now < MIX_WINDOW_S or not prompts or not outputs:
            return self._capacity
        mean_prompt = sum(prompts) / len(prompts)
        mean_output = sum(outputs) / len(outputs)
        last = self._last
        if (
            last is not None
            and last[2] == longest
            and not drifted((last[0], last[1]), (mean_prompt, mean_output))
        ):
            return self._capacity
        histogram = LengthHistogram.of(prompts, self.bounds, self.max_model_len)
        mix = mix_capacity(histogram, mean_prompt, mean_output, longest, self.goodput)
        self._last = (mean_prompt, mean_output, longest)
        self._capacity = mix.requests_per_second if mix is not None else None
        return self._capacity
