"""How the measured silicon rows were run: the launch flags and the benchmark client. Pure.

The rows of AIConfigurator's `silicon_sample.csv` do not record their flags; what is known
comes from AIConfigurator's generator, which writes the engines' launch commands and the
benchmark script (aiconfigurator@095f58a:src/aiconfigurator/generator/). Two of its facts
change what an engine computes:

- SGLang launch. Aggregated SGLang workers get `--enable-mixed-chunk` and
  `--max-prefill-tokens ISL+1500` (generator/rule_plugin/sglang.rule and the
  `cli_args.<version>.j2` templates). Both flags entered the generator on 2026-01-19
  (aiconfigurator commits fa895ff, 07a3779); the templates of SGLang 0.5.1.post1, 0.5.3.post2
  and 0.5.4.post3 are older than that, those of 0.5.6.post2, 0.5.8, 0.5.9, 0.5.10.post1 and
  0.5.11 were added after it and have carried the flags from their first version. The
  generator launches a version with the closest template at or below it
  (generator/rendering/engine.py `_select_versioned_template`). So a row of SGLang 0.5.6.post2
  or later ran with mixed chunking: prefill chunks join the running decodes in one batch, the
  prefill budget being min(max_prefill_tokens, chunked_prefill_size) less the running
  requests (`PrefillAdder(..., running_bs if self.is_mixed_chunk else 0)`,
  sglang@0.5.9:python/sglang/srt/managers/scheduler.py), which is vLLM V1's schedule with
  `max_num_batched_tokens` = that budget. An older row keeps SGLang's defaults; the 78 H100
  rows of 0.5.1.post1 confirm it (their TTFT is a synchronised burst's in every round; with
  mixed chunking the median |error| goes from 6.5% to 65%).
- Prompts. The benchmark runs `aiperf profile --concurrency C --num-requests 20C
  --warmup-request-count 2C` without `--num-dataset-entries`
  (generator/config/backend_templates/benchmark/bench_run.sh.j2), so aiperf draws every
  request's prompt at random from 100 synthetic ones (`ConversationDefaults.NUM`,
  aiperf@db4f639:aiperf/common/config/config_defaults.py; aiperf/dataset/dataset_manager.py),
  and the generated launches leave the prefix caches on: most measured requests would be
  prefix-cache hits. The H100 rows refute that for the rows at hand (scored with 100
  prompts, their TTFT bias falls to -49% / -51% on the fit / held-out split), so the default
  is every prompt distinct; `dataset_entries` scores a benchmark that did repeat them.
- KV pages. The generator passes no --page-size, so SGLang runs the page its default
  attention backend forces: 64 tokens on Blackwell (trtllm_mha, or trtllm_mla for DeepSeek
  V3 / R1), 1 on Hopper (fa3); capacity/sglang_defaults.py cites the source. A request holds
  its tokens rounded up to whole pages.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Literal

from tokenfleet.capacity.engine_profiles import engine_facts
from tokenfleet.capacity.load import Replica

SglangLaunch = Literal["auto", "defaults", "generator"]
SGLANG_LAUNCHES: tuple[SglangLaunch, ...] = ("auto", "defaults", "generator")  # CLI choices
# The first SGLang release whose generator template always carried --enable-mixed-chunk.
GENERATOR_SGLANG_SINCE = (0, 5, 6, 2)
PREFILL_TOKENS_MARGIN = 1500  # --max-prefill-tokens ISL + 1500 (sglang.rule)
WARMUP_ROUNDS = 2  # --warmup-request-count 2 x C, before the measured requests
ROUNDS = 20  # --num-requests 20 x C


def release(version: str) -> tuple[int, int, int, int] | None:
    """'0.5.6.post2' -> (0, 5, 6, 2); None if it is not a version number."""
    m = re.match(r"^v?(\d+)\.(\d+)(?:\.(\d+))?(?:\.?post(\d+))?", version.strip())
    if not m:
        return None
    major, minor, patch, post = m.groups()
    return int(major), int(minor), int(patch or 0), int(post or 0)


@dataclass(frozen=True)
class Harness:
    """The launch and client settings a silicon row is predicted under."""

    sglang_launch: SglangLaunch = "auto"
    dataset_entries: int = 0  # distinct prompts the client cycles through; 0: all distinct
    warmup_rounds: int = WARMUP_ROUNDS
    rounds: int = ROUNDS

    def sglang_generator_flags(self, version: str) -> bool:
        """Whether an SGLang row ran with the generator's --enable-mixed-chunk and
        --max-prefill-tokens (see the module docstring)."""
        if self.sglang_launch != "auto":
            return self.sglang_launch == "generator"
        v = release(version)
        return v is not None and v >= GENERATOR_SGLANG_SINCE

    def launch(
        self, engine: str, version: str, isl: int, replica: Replica, page_size: int = 1
    ) -> Replica:
        """The replica as the row's launch command configured it. `page_size`: the KV page
        SGLang's default attention backend forces on the row's GPU (the generator sets no
        --page-size; sglang_defaults.launch_page_size)."""
        if not engine_facts(engine).page_set_by_backend:
            return replica
        replica = replace(replica, block_size=max(1, page_size))
        if not self.sglang_generator_flags(version):
            return replica
        budget = min(replica.max_num_batched_tokens, isl + PREFILL_TOKENS_MARGIN)
        return replace(replica, mixed_prefill=True, max_num_batched_tokens=budget)

    def seen_share(self, concurrency: int, first: int = 0, count: int | None = None) -> float:
        """The mean chance that a measured request repeats a prompt sent before it, over the
        measured requests `first` .. `first + count` (default: to the end): the n-th request
        sent (warm-up counted) draws one already drawn with 1 - (1 - 1/entries)^n."""
        c = max(1, concurrency)
        n = c * self.rounds - first if count is None else count
        if n <= 0 or self.dataset_entries <= 0:
            return 0.0
        q = 1.0 - 1.0 / self.dataset_entries
        start = c * self.warmup_rounds + first
        return 1.0 - q**start * (1.0 - q**n) / (n * (1.0 - q))  # mean of 1 - q^k

    def kept_share(self, kv_cache_tokens: int, running: int, isl: int, osl: int) -> float:
        """The share of the distinct prompts the prefix cache keeps: the KV pool less what
        the running requests hold, over the prompts' tokens (an LRU cache over prompts drawn
        at random keeps about that share of them)."""
        free = kv_cache_tokens - max(0, running) * (isl + osl)
        want = max(1, self.dataset_entries * isl)
        return min(1.0, max(0.0, free / want))

    def hit_rate(
        self,
        concurrency: int,
        kv_cache_tokens: int,
        running: int,
        isl: int,
        osl: int,
        first: int = 0,
        count: int | None = None,
    ) -> float:
        """The share of the measured requests' prompt tokens that are prefix-cache hits."""
        seen = self.seen_share(concurrency, first, count)
        if seen <= 0.0:
            return 0.0
        return seen * self.kept_share(kv_cache_tokens, running, isl, osl)


DEFAULT = Harness()
