"""A configuration the engine served is never refused as "does not fit".

vLLM profiles its sampler over --max-num-seqs dummy logits after the dummy forward has freed
its activations (vllm/v1/worker/gpu_model_runner.py: profile_run, _dummy_sampler_run), so
the reserve follows the seats the plan renders. vLLM 0.11 served Qwen3-32B at TP 1 with
32K-token prompts on one H100; at the default 1,024 seats the 151,936-token vocabulary
alone takes 2.3 GiB of sampler buffers, which with the forward's peak left the KV cache
short of one 33K-token request. With the few seats the KV cache holds anyway it fits.
"""

from __future__ import annotations

import pytest

from tokenfleet.capacity import PlanError, PlanRequest, get_gpu, load_model, plan

QWEN = load_model("Qwen/Qwen3-32B")


@pytest.mark.parametrize("version", ["0.11.0", "0.32.0"])
def test_qwen3_32b_tp1_takes_32k_prompts_on_one_h100(version: str) -> None:
    p = plan(
        PlanRequest(
            arch=QWEN,
            gpu=get_gpu("h100-sxm"),
            engine_version=version,
            tensor_parallel_size=1,
            concurrency=1,
            input_tokens=32_000,
            output_tokens=1_000,
        )
    )
    assert p.kv_cache_tokens >= 33_000 and p.max_model_len >= 33_000
    # The sampler is profiled over the seats rendered: a handful, not the default 1,024.
    assert p.max_num_seqs <= 8
    assert p.memory.activation < 4.5 * 1024**3


def test_seats_the_user_fixes_are_sized_as_given() -> None:
    # With --max-num-seqs 1024 the profile covers 1,024 logits: the 0.11 reserve no longer
    # leaves room, and the refusal says so.
    with pytest.raises(PlanError, match="does not fit"):
        plan(
            PlanRequest(
                arch=QWEN,
                gpu=get_gpu("h100-sxm"),
                engine_version="0.11.0",
                tensor_parallel_size=1,
                max_num_seqs=1024,
                concurrency=1,
                input_tokens=32_000,
                output_tokens=1_000,
            )
        )
