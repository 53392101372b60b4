"""A replica's prefix cache for `tokenfleet autoscale-sim`, over a trace's prefix blocks.

Mooncake's trace gives each request `hash_ids`: the ids of its prompt's 512-token blocks,
equal ids meaning equal prefixes (FAST'25 "Mooncake", traces/README). A replica keeps the
blocks of the prompts it prefilled, least recently used out first, bounded by its KV cache
(the plan's kv_cache_tokens), as vLLM's and SGLang's automatic prefix caching do: a
request whose leading blocks are held skips their prefill. Hit rate is counted in tokens,
as vLLM's prefix_cache_hits / prefix_cache_queries are.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence

BLOCK_TOKENS = 512  # Mooncake's hash_ids block size


class PrefixCache:
    def __init__(self, kv_cache_tokens: int) -> None:
        self.capacity = max(kv_cache_tokens // BLOCK_TOKENS, 0)
        self._blocks: OrderedDict[int, None] = OrderedDict()

    def leading(self, blocks: Sequence[int]) -> int:
        """How many of `blocks`, from the first, are held (a look, not a use)."""
        n = 0
        for block in blocks:
            if block not in self._blocks:
                break
            n += 1
        return n

    def use(self, blocks: Sequence[int], prompt: int) -> int:
        """Prompt tokens served from the cache for this prompt; its blocks are then held.
        At least one token is always computed (the engines recompute the last one)."""
        hit = self.leading(blocks)
        for block in blocks:
            self._blocks[block] = None
            self._blocks.move_to_end(block)
        while len(self._blocks) > self.capacity:
            self._blocks.popitem(last=False)
        return max(0, min(hit * BLOCK_TOKENS, prompt - 1))
