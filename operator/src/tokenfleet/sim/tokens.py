"""The simulator's stand-in tokenizer: deterministic, dependency-free, close enough to BPE.

Prompt length: every whitespace-separated word counts ceil(len(word) / 4) tokens (BPE
tokenizers of Llama / Qwen average about 4 characters of English per token), so
"The big red fox" is 4 tokens, "quick" 2 and "internationalization" 5. A prompt given as a list
of token ids counts len(list) tokens. Chat messages add CHAT_TOKENS_PER_MESSAGE for the
role markers a chat template wraps around each message, plus CHAT_TOKENS_PRIMING for the
assistant header the template appends.

Output text: one short filler word per token (each 1-4 letters, so it re-tokenizes to
exactly one token per word with the rule above), chosen by a seeded RNG so that the same
--seed and the same request id give the same text.
"""

from __future__ import annotations

import random
from typing import Any

CHARS_PER_TOKEN = 4
CHAT_TOKENS_PER_MESSAGE = 4
CHAT_TOKENS_PRIMING = 3

FILLER_WORDS: tuple[str, ...] = (
    "the", "a", "of", "and", "to", "in", "is", "it", "that", "for", "on", "with", "as", "was",
    "at", "by", "this", "from", "or", "an", "be", "are", "we", "can", "will", "not", "but",
    "all", "one", "so", "more", "some", "time", "very", "when", "new", "than", "into", "way",
    "each", "long", "make", "like", "over", "such", "good", "work", "made", "just", "also",
)  # fmt: skip


def count_text_tokens(text: str) -> int:
    """Tokens in `text` by the 4-characters-per-word-piece rule (0 for empty text)."""
    return sum(-(-len(word) // CHARS_PER_TOKEN) for word in text.split())


def count_prompt_tokens(prompt: str | list[int]) -> int:
    """A completions prompt: a string, or a list of token ids (counted as given)."""
    if isinstance(prompt, str):
        return count_text_tokens(prompt)
    return len(prompt)


def count_chat_tokens(messages: list[dict[str, Any]]) -> int:
    """A chat prompt: every message's text plus the template's per-message markers."""
    total = CHAT_TOKENS_PRIMING
    for message in messages:
        total += CHAT_TOKENS_PER_MESSAGE + count_text_tokens(message_text(message))
    return total


def message_text(message: dict[str, Any]) -> str:
    """A message's text: `content` as a string or as a list of {"type": "text"} parts."""
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return " ".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
    return ""


class Filler:
    """Deterministic output words for one request."""

    def __init__(self, seed: int, request_index: int) -> None:
        # A string seed is hashed stably by random.Random (unlike hash() of a tuple).
        self._rng = random.Random(f"{seed}:{request_index}")

    def next_word(self, first: bool) -> str:
        word = self._rng.choice(FILLER_WORDS)
        return word if first else " " + word
