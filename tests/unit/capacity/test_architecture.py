"""Architecture parsing and parameter counts, against the models' published sizes."""

import json

import pytest

from tokenfleet.capacity import architecture_from_config, catalog_ids, load_model
from tokenfleet.capacity.quantization import weight_format


@pytest.mark.parametrize(
    "model,total_b,active_b",
    [
        ("meta-llama/Llama-3.1-8B", 8.03, 8.03),
        ("meta-llama/Llama-3.1-70B", 70.6, 70.6),
        ("meta-llama/Llama-3.1-405B", 405.9, 405.9),
        ("Qwen/Qwen2.5-7B", 7.62, 7.62),
        ("Qwen/Qwen2.5-72B", 72.7, 72.7),
        ("Qwen/Qwen3-8B", 8.19, 8.19),
        ("Qwen/Qwen3-30B-A3B", 30.5, 3.3),
        ("Qwen/Qwen3-235B-A22B", 235.1, 22.2),
        ("mistralai/Mistral-7B-v0.1", 7.24, 7.24),
        ("mistralai/Mixtral-8x7B-v0.1", 46.7, 12.9),
        ("deepseek-ai/DeepSeek-V3", 671.0, 37.5),
        ("openai/gpt-oss-20b", 20.9, 4.2),  # active counts the LM head the card leaves out
        ("openai/gpt-oss-120b", 116.8, 5.7),
        ("google/gemma-3-27b-it", 27.4, 27.4),  # incl. the SigLIP vision tower
    ],
)
def test_parameter_counts_match_published_sizes(model, total_b, active_b):
    p = load_model(model).params
    assert p.total / 1e9 == pytest.approx(total_b, rel=0.01)
    assert p.active / 1e9 == pytest.approx(active_b, rel=0.03)


def test_catalog_holds_the_required_models():
    required = {
        "meta-llama/Llama-3.1-8B", "meta-llama/Llama-3.1-70B", "meta-llama/Llama-3.1-405B",
        "meta-llama/Llama-3.3-70B-Instruct", "Qwen/Qwen2.5-7B", "Qwen/Qwen2.5-72B",
        "Qwen/Qwen3-8B", "Qwen/Qwen3-32B", "Qwen/Qwen3-30B-A3B", "Qwen/Qwen3-235B-A22B",
        "mistralai/Mistral-7B-v0.1", "mistralai/Mixtral-8x7B-v0.1", "deepseek-ai/DeepSeek-V3",
        "openai/gpt-oss-20b", "openai/gpt-oss-120b", "google/gemma-3-27b-it",
    }  # fmt: skip
    assert required <= set(catalog_ids())


@pytest.mark.parametrize(
    "model,sliding,full,window",
    [
        ("openai/gpt-oss-120b", 18, 18, 128),
        ("google/gemma-3-27b-it", 52, 10, 1024),
        ("mistralai/Mistral-7B-v0.1", 32, 0, 4096),
        ("Qwen/Qwen2.5-7B", 0, 28, 0),  # ships a window with use_sliding_window: false
        ("meta-llama/Llama-3.1-8B", 0, 32, 0),
    ],
)
def test_sliding_window_layout(model, sliding, full, window):
    a = load_model(model)
    assert (a.num_sliding_layers, a.num_full_layers, a.sliding_window) == (sliding, full, window)


def test_explicit_head_dim_wins_over_hidden_over_heads():
    a = load_model("Qwen/Qwen3-32B")  # hidden 5120 / 64 heads = 80, but head_dim is 128
    assert a.attention.head_dim == 128


@pytest.mark.parametrize("tied,lm_head", [(True, 0), (False, 32000 * 4096)])
def test_tied_embeddings_have_no_separate_lm_head(tied, lm_head):
    config = {"model_type": "llama", "hidden_size": 4096, "num_hidden_layers": 2,
              "num_attention_heads": 32, "vocab_size": 32000, "intermediate_size": 11008,
              "max_position_embeddings": 4096, "tie_word_embeddings": tied}  # fmt: skip
    assert architecture_from_config(config, "m").params.lm_head == lm_head


@pytest.mark.parametrize(
    "model,quant,bytes_attention,bytes_experts",
    [
        ("openai/gpt-oss-120b", None, 2.0, 0.53125),  # mxfp4 experts, bf16 attention
        ("deepseek-ai/DeepSeek-V3", None, 1.0, 1.0),  # block fp8 everywhere
        ("meta-llama/Llama-3.1-8B", "fp8", 1.0, 1.0),
        ("meta-llama/Llama-3.1-8B", "awq", 0.52, 0.52),
        ("meta-llama/Llama-3.1-8B", None, 2.0, 2.0),
    ],
)
def test_weight_format(model, quant, bytes_attention, bytes_experts):
    fmt = weight_format(load_model(model).quantization_config, "auto", quant)
    assert fmt.bytes_for("attention") == pytest.approx(bytes_attention, abs=0.01)
    assert fmt.bytes_for("experts") == pytest.approx(bytes_experts, abs=0.01)
    assert fmt.bytes_for("embedding") == 2.0


def test_compressed_tensors_reads_bits_from_config_groups():
    q = {"quant_method": "compressed-tensors",
         "config_groups": {"group_0": {"weights": {"num_bits": 4, "group_size": 128}}}}  # fmt: skip
    assert weight_format(q).linear_bytes == pytest.approx(0.5 + 2 / 128)


def test_config_json_path_is_read(tmp_path):
    config = {"model_type": "llama", "hidden_size": 2048, "num_hidden_layers": 16,
              "num_attention_heads": 32, "num_key_value_heads": 8, "vocab_size": 128256,
              "intermediate_size": 8192, "max_position_embeddings": 131072,
              "tie_word_embeddings": True}  # fmt: skip
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    assert load_model(str(path)).params.total / 1e9 == pytest.approx(1.24, rel=0.01)
    assert load_model(str(tmp_path)).layers == 16  # a directory holding config.json
