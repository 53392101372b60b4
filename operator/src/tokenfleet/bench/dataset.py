"""Synthetic prompts for `tokenfleet bench` (pure: no I/O, deterministic per seed).

A prompt is a run of short common English words. Each word (with its leading space) is a
single token in the BPE vocabularies of Llama, Qwen, Mistral and GPT-2 and in the simulator's
stand-in tokenizer, so `n` words is a good estimate of `n` prompt tokens without loading a
tokenizer. The server's own count (the
`usage.prompt_tokens` of the final stream chunk) replaces the estimate whenever it is sent.
Every request starts with different words so an engine's prefix cache cannot turn the
benchmark into a cache benchmark.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass

# Short, frequent words: one token each (with a leading space) in common BPE tokenizers.
_WORD_TEXT = """
    the of and to in is was for that on with as by at from his her they this have are not
    but had one all were when we there can an which their said if will each about how up
    out them then she many some so these would other into has more two time like him see
    could no make than first been its who now people my made over did down only way find
    use may long day get come part new any work take year live back give most very after
    thing our just name good man think say great where help through much before line right
    too mean old same tell boy follow came want show also around form three small set put
    end does another well large must big even such because turn here why ask went men read
    need land different home us move try kind hand picture again change off play spell air
    away animal house point page letter mother answer found study still learn should world
    high every near add food between own below country plant last school father keep tree
    never start city earth eye light thought head under story saw left few while along might
    close something seem next hard open example begin life always those both paper together
    got group often run important until children side feet car mile night walk white sea
    began grow took river four carry state once book hear stop without second later miss
    idea enough eat face watch far real almost let above girl sometimes mountain cut young
    talk soon list song being leave family body music color stand sun question fish area
    mark dog horse birds problem complete room knew since ever piece told usually friends
    easy heard order red door sure become top ship across today during short better best
    however low hours black products happened whole measure remember early waves reached
    """
# At most 4 letters: also one token each by the simulator's 4-characters-per-token rule.
WORDS: tuple[str, ...] = tuple(w for w in _WORD_TEXT.split() if len(w) <= 4)

# Named workload shapes (input tokens, output tokens) from the project's source material:
# a chat-like mix, a prefill-bound one (long prompt, short answer) and a decode-bound one.
SHAPES: dict[str, tuple[int, int]] = {
    "synthetic-chat": (2048, 300),
    "prefill-heavy": (8192, 64),
    "decode-heavy": (128, 1024),
}
# vLLM's `--dataset-name random` defaults.
RANDOM_DEFAULTS: tuple[int, int] = (1024, 128)
DATASETS: tuple[str, ...] = ("random", *SHAPES)


@dataclass(frozen=True, slots=True)
class SampleRequest:
    """One request to send: the prompt, its estimated token count, the tokens to generate."""

    prompt: str
    prompt_len: int
    expected_output_len: int


def estimate_tokens(text: str) -> int:
    """Token estimate for text built from WORDS: one token per word."""
    return len(text.split())


def length_bounds(length: int, range_ratio: float) -> tuple[int, int]:
    """Inclusive [low, high] for a length drawn uniformly around `length`.

    Same rule as vLLM's random dataset (0.9+): [floor(L * (1 - r)), ceil(L * (1 + r))],
    never below 1 token.
    """
    if not 0.0 <= range_ratio < 1.0:
        raise ValueError(f"--random-range-ratio {range_ratio}: must be in [0, 1); use e.g. 0.1")
    # The epsilon keeps float noise (100 * 1.1 = 110.00000000000001) from widening a bound.
    low = max(1, math.floor(length * (1.0 - range_ratio) + 1e-9))
    high = max(low, math.ceil(length * (1.0 + range_ratio) - 1e-9))
    return low, high


@dataclass(frozen=True, slots=True)
class DatasetSpec:
    """What to generate: sizes (before the range ratio) and the seed."""

    input_len: int
    output_len: int
    range_ratio: float = 0.0
    seed: int = 0

    def __post_init__(self) -> None:
        if self.input_len < 1:
            raise ValueError(f"--random-input-len {self.input_len}: must be at least 1")
        if self.output_len < 1:
            raise ValueError(f"--random-output-len {self.output_len}: must be at least 1")
        length_bounds(self.input_len, self.range_ratio)  # validates the ratio

    def request(self, index: int) -> SampleRequest:
        """The index-th request; the same for the same (spec, index), so runs are repeatable
        and a duration-bounded run can draw as many requests as it needs, lazily."""
        rng = random.Random(self.seed * 1_000_003 + index)
        in_low, in_high = length_bounds(self.input_len, self.range_ratio)
        out_low, out_high = length_bounds(self.output_len, self.range_ratio)
        n_in = rng.randint(in_low, in_high)
        n_out = rng.randint(out_low, out_high)
        prompt = " ".join(rng.choices(WORDS, k=n_in))
        return SampleRequest(prompt=prompt, prompt_len=n_in, expected_output_len=n_out)


def dataset_spec(
    name: str,
    input_len: int | None,
    output_len: int | None,
    range_ratio: float,
    seed: int,
) -> DatasetSpec:
    """Resolve `--dataset-name` plus the optional explicit lengths into a DatasetSpec.

    Explicit `--random-input-len` / `--random-output-len` override a named shape's sizes.
    """
    if name == "random":
        default_in, default_out = RANDOM_DEFAULTS
    elif name in SHAPES:
        default_in, default_out = SHAPES[name]
    else:
        raise ValueError(
            f"--dataset-name {name!r}: unknown dataset; use one of {', '.join(DATASETS)}"
        )
    return DatasetSpec(
        input_len=input_len if input_len is not None else default_in,
        output_len=output_len if output_len is not None else default_out,
        range_ratio=range_ratio,
        seed=seed,
    )
