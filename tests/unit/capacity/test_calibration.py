"""The six calibration points of reference/engines.md: predicted vs printed KV tokens.

Each row is a real engine log line; the capacity model must land within 2% of the printed
token count with the engine's own settings (the engine default max_num_seqs and
max_num_batched_tokens for that GPU, as those runs used).
"""

import pytest

from tokenfleet.capacity import PlanRequest, architecture_from_config, get_gpu, load_model, plan

# QwQ-32B is not in the catalog: its config.json (Qwen2.5-32B architecture) from
# https://huggingface.co/Qwen/QwQ-32B/blob/main/config.json
QWQ_32B = {
    "architectures": ["Qwen2ForCausalLM"],
    "model_type": "qwen2",
    "hidden_size": 5120,
    "intermediate_size": 27648,
    "num_hidden_layers": 64,
    "num_attention_heads": 40,
    "num_key_value_heads": 8,
    "vocab_size": 152064,
    "max_position_embeddings": 131072,
    "tie_word_embeddings": False,
}

CALIBRATION = [
    # engine, version, model, gpu, tp, memory fraction, max_len, printed tokens, printed concurrency
    ("vllm", "0.19.0", "meta-llama/Llama-3.1-8B", "h100-sxm", 1, 0.95, 8192, 476_016, None),
    ("vllm", "0.19.0", "Qwen/Qwen2.5-7B", "h100-sxm", 1, 0.95, 8192, 1_096_000, None),
    ("vllm", "0.19.0", "mistralai/Mixtral-8x7B-v0.1", "h100-sxm", 2, 0.95, 8192, 465_936, None),
    ("vllm", "0.19.0", "google/gemma-3-27b-it", "h100-sxm", 1, 0.95, 8192, 36_560, 4.46),
    ("vllm", "0.9.2", "Qwen/Qwen3-8B", "a100-40gb", 1, 0.90, 40960, 136_080, 3.32),
    ("sglang", "0.4.3", "QwQ-32B", "l4", 4, 0.85, 131072, 46_611, None),
]


def _arch(model: str):
    return (
        architecture_from_config(QWQ_32B, "Qwen/QwQ-32B")
        if model == "QwQ-32B"
        else load_model(model)
    )


@pytest.mark.parametrize(
    "engine,version,model,gpu,tp,fraction,max_len,printed,concurrency", CALIBRATION
)
def test_predicted_kv_tokens_within_two_percent_of_printed(
    engine, version, model, gpu, tp, fraction, max_len, printed, concurrency
):
    g = get_gpu(gpu)
    p = plan(
        PlanRequest(
            arch=_arch(model),
            gpu=g,
            engine=engine,
            engine_version=version,
            tensor_parallel_size=tp,
            pipeline_parallel_size=1,
            memory_fraction=fraction,
            max_model_len=max_len,
            max_num_seqs=1024 if g.large else 256,  # the engine default those runs used
        )
    )
    assert p.kv_cache_tokens == pytest.approx(printed, rel=0.02)
    if concurrency is not None:
        assert p.max_concurrency == pytest.approx(concurrency, rel=0.02)
