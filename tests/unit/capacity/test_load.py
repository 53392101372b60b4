"""capacity/load.py: how a planned replica's load maps onto scheduler runs.

Pipeline parallelism keeps one micro-batch per stage in flight (vLLM V1's batch queue, SGLang's
PP micro-batches): the replica runs as `pipeline_lanes` independent lanes, each stepping at the
whole pipeline's time. The stages then overlap: compute-bound prefill runs about twice as fast
at PP 2, while weight-bound decode gains little, and a lone request nothing.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from tokenfleet.capacity import get_gpu, load_model
from tokenfleet.capacity.load import Replica, closed, lockstep
from tokenfleet.capacity.performance import build_step_model
from tokenfleet.capacity.quantization import weight_format

L70 = "meta-llama/Llama-3.1-70B"


@pytest.fixture(scope="module")
def timer():
    return build_step_model(load_model(L70), get_gpu("h100-sxm"), 2, 2, weight_format({}), 2.0)


def test_engines_set_their_paging_prefill_policy_and_lanes() -> None:
    vllm = Replica.of("vllm", 100_000, 256, 8192, 8192, pipeline_parallel_size=2)
    sglang = Replica.of("sglang", 100_000, 256, 8192, 8192)
    assert (vllm.block_size, vllm.mixed_prefill, vllm.pipeline_lanes) == (16, True, 2)
    assert (sglang.block_size, sglang.mixed_prefill, sglang.pipeline_lanes) == (1, False, 1)


@pytest.mark.parametrize(
    ("running", "lanes", "factor", "seqs", "budget"),
    [
        (1, 2, 1, 256, 8192),  # one request cannot be split into micro-batches
        (16, 2, 2, 128, 8192),  # two lanes: half the sequences each, a full token budget each
        (256, 2, 4, 64, 4096),  # then lockstep copies (w = 2) within each lane
        (16, 1, 1, 256, 8192),
    ],
)
def test_lanes_split_sequences_and_cache_but_not_the_token_budget(
    timer, running: int, lanes: int, factor: int, seqs: int, budget: int
) -> None:
    replica = Replica.of("vllm", 400_000, 256, 8192, 8192, pipeline_parallel_size=lanes)
    _, config, f = lockstep(replica, timer, running, 2348)
    assert (f, config.max_num_seqs, config.max_num_batched_tokens) == (factor, seqs, budget)
    assert config.kv_cache_tokens == 400_000 // factor


def test_pipeline_lanes_overlap_compute_but_not_weight_reads(timer) -> None:
    piped = Replica.of("vllm", 400_000, 256, 8192, 8192, pipeline_parallel_size=2)
    serial = replace(piped, pipeline_lanes=1)

    def gain(clients: int, prompt: int, output: int) -> float:
        lanes = closed(timer, piped, clients, prompt, output)
        one = closed(timer, serial, clients, prompt, output)
        return lanes.total_tokens_per_second / one.total_tokens_per_second

    # Prefill-bound: while one micro-batch is on stage 2 the next is on stage 1, where a
    # single batch would leave a stage idle: close to twice the tokens.
    assert gain(64, 4096, 16) > 1.8
    # Decode-bound: each micro-batch still reads every stage's weights, so splitting a batch
    # of 64 into two of 32 buys little.
    assert gain(64, 128, 512) < 1.2
    # One request cannot be split at all.
    assert closed(timer, piped, 1, 1024, 256) == closed(timer, serial, 1, 1024, 256)
