"""Every way plan() refuses, each with the field, the value and a fix in one line."""

import pytest

from tokenfleet.capacity import (
    PlanError,
    PlanRequest,
    architecture_from_config,
    get_gpu,
    load_model,
    plan,
)
from tokenfleet.errors import UserError

LLAMA_8B = load_model("meta-llama/Llama-3.1-8B")


def _req(**kw):
    base = dict(arch=LLAMA_8B, gpu=get_gpu("h100-sxm"))
    return PlanRequest(**{**base, **kw})


@pytest.mark.parametrize(
    "make,field,fragment",
    [
        (lambda: _req(tensor_parallel_size=3), "tp", "does not divide the 32 attention heads"),
        (lambda: _req(tensor_parallel_size=16), "tp", "exceeds the 8 GPUs of one node"),
        (lambda: _req(tensor_parallel_size=4, max_gpus_per_node=2), "tp", "exceeds the 2 GPUs"),
        (lambda: _req(pipeline_parallel_size=99), "pp", "must be 1..32"),
        (lambda: _req(memory_fraction=1.5), "gpu-memory-utilization", "between 0.05 and 0.99"),
        (lambda: _req(engine="sglang", memory_fraction=0.01), "mem-fraction-static", "between"),
        (lambda: _req(max_model_len=1024), "max-model-len", "shorter than input + output"),
        (lambda: _req(concurrency=0), "concurrency", "positive"),
        (lambda: _req(ttft_slo_ms=0), "ttft-slo-ms", "positive"),
        (lambda: _req(kv_cache_dtype="int3"), "kv-cache-dtype", "unknown KV cache dtype"),
        (lambda: _req(quantization="q2_k"), "quantization", "unknown quantization"),
        (lambda: _req(dtype="float8"), "dtype", "unknown dtype"),
        (lambda: _req(engine_version="0.6.3"), "engine-version", "not modelled"),
        (lambda: _req(engine_version="latest"), "engine-version", "not a version"),
        (lambda: _req(engine="tgi"), "engine", "use vllm or sglang"),
        # Does not fit anywhere: the message shows the weights against the budget.
        (
            lambda: _req(arch=load_model("meta-llama/Llama-3.1-405B"), gpu=get_gpu("l4")),
            "model",
            "GiB weights",
        ),
        # Fits only with more GPUs than the fixed TP x PP allows.
        (
            lambda: _req(
                arch=load_model("meta-llama/Llama-3.1-70B"),
                tensor_parallel_size=1,
                pipeline_parallel_size=1,
            ),
            "tp",
            "does not fit",
        ),
    ],
)
def test_plan_rejects(make, field, fragment):
    with pytest.raises(PlanError) as err:
        plan(make())
    assert err.value.field == field
    assert fragment in str(err.value)
    assert "\n" not in str(err.value)


def test_unknown_model_lists_closest_catalog_ids():
    with pytest.raises(UserError) as err:
        load_model("meta-llama/Llama-3.1-8B-Instruct-typo")
    assert err.value.field == "model"
    assert "meta-llama/Llama-3.1-8B" in str(err.value)
    assert "config.json" in err.value.fix


def test_unknown_gpu_suggests_ids():
    with pytest.raises(PlanError, match="did you mean h100-sxm"):
        get_gpu("h100sxm")


def test_config_missing_a_field_names_it():
    config = {"hidden_size": 4096, "num_hidden_layers": 32, "vocab_size": 32000,
              "intermediate_size": 11008, "max_position_embeddings": 4096}  # fmt: skip
    with pytest.raises(UserError) as err:
        architecture_from_config(config, "my-model")
    assert "num_attention_heads" in str(err.value)


def test_config_with_a_bad_value_names_it():
    config = {"hidden_size": 4096, "num_hidden_layers": -1, "num_attention_heads": 32,
              "vocab_size": 32000, "intermediate_size": 11008,
              "max_position_embeddings": 4096}  # fmt: skip
    with pytest.raises(UserError, match=r"num_hidden_layers.*integer from 1 to 1024"):
        architecture_from_config(config, "my-model")


GOOD = {"hidden_size": 4096, "num_hidden_layers": 32, "num_attention_heads": 32,
        "num_key_value_heads": 8, "vocab_size": 32000, "intermediate_size": 11008,
        "max_position_embeddings": 4096}  # fmt: skip


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("num_hidden_layers", 100_000_000, "integer from 1 to 1024"),  # hung the event loop
        ("num_hidden_layers", 10**12, "integer from 1 to 1024"),  # killed it for memory
        ("num_hidden_layers", 32.5, "integer from 1"),
        ("hidden_size", True, "integer from 1"),
        ("head_dim", "x", "integer from 0"),  # raised a bare ValueError before
        ("num_key_value_heads", -8, "integer from 0"),  # negative heads planned
        ("num_key_value_heads", 64, "more than num_attention_heads"),
        ("vocab_size", 10**9, "integer from 1 to 4194304"),
        ("max_position_embeddings", 10**15, "integer from 0"),
        ("num_local_experts", 10**6, "integer from 0 to 8192"),
        ("sliding_window", "big", "integer from 0"),
        ("kv_lora_rank", -1, "integer from 0"),
        ("quantization_config", "fp8", "must be an object"),
    ],
)
def test_config_values_out_of_bounds_are_refused_by_name(key, value, message):
    with pytest.raises(UserError, match=message) as err:
        architecture_from_config({**GOOD, key: value}, "my-model")
    assert f"'{key}'" in str(err.value)


def test_config_with_more_active_experts_than_experts_is_refused():
    config = {**GOOD, "num_local_experts": 8, "num_experts_per_tok": 9}
    with pytest.raises(UserError, match=r"num_experts_per_tok.*more than the 8 experts"):
        architecture_from_config(config, "my-model")


def test_config_path_errors(tmp_path):
    with pytest.raises(UserError, match="no such config file"):
        load_model(str(tmp_path / "missing.json"))
    bad = tmp_path / "config.json"
    bad.write_text("{not json")
    with pytest.raises(UserError, match="not valid JSON"):
        load_model(str(bad))


@pytest.mark.parametrize(
    ("extra", "pp"),
    [({}, 1), ({}, 3), ({"sliding_window": 1024, "sliding_window_pattern": 6}, 4),
     ({"sliding_window": 512}, 2)],
)  # fmt: skip
def test_stage_layers_split_every_layer_once(extra, pp):
    from tokenfleet.capacity.kv import stage_layers

    arch = architecture_from_config({**GOOD, "num_hidden_layers": 62, **extra}, "m")
    stages = stage_layers(arch, pp)
    assert sum(full + sliding for full, sliding in stages) == 62
    assert sum(sliding for _, sliding in stages) == arch.num_sliding_layers
    assert [f + s for f, s in stages] == sorted(f + s for f, s in stages)  # remainder last
