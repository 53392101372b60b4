"""Sizing the simulator from CLI options, and its stand-in tokenizer."""

from __future__ import annotations

import pytest

from tests.support.sim_args import sim_args
from tokenfleet.cli import main
from tokenfleet.errors import UserError
from tokenfleet.sim.setup import settings_from_args
from tokenfleet.sim.tokens import (
    FILLER_WORDS,
    Filler,
    count_chat_tokens,
    count_prompt_tokens,
    count_text_tokens,
)


@pytest.mark.parametrize(
    ("text", "tokens"),
    [
        ("", 0),
        ("hello", 2),
        ("the quick brown fox", 1 + 2 + 2 + 1),
        ("internationalization", 5),
        ("  spaced\tout\nwords ", 2 + 1 + 2),
    ],
)
def test_text_tokens(text: str, tokens: int) -> None:
    assert count_text_tokens(text) == tokens


def test_prompt_and_chat_tokens() -> None:
    assert count_prompt_tokens([1, 2, 3]) == 3
    messages = [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": [{"type": "text", "text": "hi there"}]},
    ]
    assert count_chat_tokens(messages) == 3 + (4 + 1 + 2) + (4 + 1 + 2)


def test_filler_is_seeded_and_one_token_per_word() -> None:
    words = [Filler(7, 3).next_word(i == 0) for i in range(50)]
    again = [Filler(7, 3).next_word(i == 0) for i in range(50)]
    other = [Filler(8, 3).next_word(i == 0) for i in range(50)]
    assert words == again != other
    assert count_text_tokens("".join(words)) == 50
    assert all(len(w) <= 4 for w in FILLER_WORDS)


def test_vllm_settings_follow_the_plan_and_overrides() -> None:
    settings, timer, summary = settings_from_args(
        sim_args("--max-model-len", "4096", "--max-num-seqs", "32", "--time-scale", "5")
    )
    config = settings.config
    assert (config.max_model_len, config.max_num_seqs, config.block_size) == (4096, 32, 16)
    assert config.kv_cache_tokens > 4096
    assert settings.time_scale == 5 and settings.served_model == "meta-llama/Llama-3.1-8B"
    assert timer.step_seconds(100, 0, 0) > 0
    assert "kv_cache_tokens=" in summary


def test_vllm_long_prefill_threshold_reaches_the_scheduler() -> None:
    settings, _, _ = settings_from_args(sim_args("--long-prefill-token-threshold", "512"))
    assert settings.config.long_prefill_token_threshold == 512
    settings, _, _ = settings_from_args(sim_args())
    assert settings.config.long_prefill_token_threshold == 0


def test_sglang_uses_a_token_pool_and_caps_requests_at_it() -> None:
    settings, _, _ = settings_from_args(sim_args("--engine", "sglang", "--kv-cache-tokens", "5000"))
    assert settings.config.block_size == 1
    assert settings.config.max_model_len == 5000


@pytest.mark.parametrize(
    ("extra", "field"),
    [
        (["--time-scale", "0"], "--time-scale"),
        (["--kv-cache-tokens", "-1"], "--kv-cache-tokens"),
        (["--max-model-len", "8192", "--kv-cache-tokens", "4096"], "--kv-cache-tokens"),
        (["--max-num-seqs", "0"], "--max-num-seqs"),
        (["--long-prefill-token-threshold", "-1"], "--long-prefill-token-threshold"),
        (
            ["--engine", "sglang", "--long-prefill-token-threshold", "512"],
            "--long-prefill-token-threshold",
        ),
        (
            ["--max-model-len", "4096", "--long-prefill-token-threshold", "5000"],
            "--long-prefill-token-threshold",
        ),
    ],
)
def test_bad_options_name_the_flag(extra: list[str], field: str) -> None:
    with pytest.raises(UserError) as error:
        settings_from_args(sim_args(*extra))
    assert error.value.field == field


def test_cli_prints_one_line_and_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["sim", "--model", "meta-llama/Llama-3.1-8B", "--gpu", "l4", "--time-scale", "0"])
    assert code == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: --time-scale=0") and "\n" not in err


@pytest.mark.parametrize(
    ("version", "present", "absent"),
    [
        (
            "0.32.0",
            {"vllm:inter_token_latency_seconds", "vllm:request_time_per_output_token_seconds"},
            {"vllm:time_per_output_token_seconds", "vllm:gpu_cache_usage_perc"},
        ),
        (None, {"vllm:inter_token_latency_seconds"}, {"vllm:gpu_cache_usage_perc"}),
        (
            "0.10.1",
            {"vllm:time_per_output_token_seconds", "vllm:gpu_cache_usage_perc"},
            {"vllm:inter_token_latency_seconds", "vllm:request_time_per_output_token_seconds"},
        ),
    ],
)
def test_vllm_metric_names_follow_the_engine_version(
    version: str | None, present: set[str], absent: set[str]
) -> None:
    from prometheus_client.parser import text_string_to_metric_families

    from tokenfleet.sim.exporter import VllmMetrics

    text = VllmMetrics("m", 1024, version).exposition().decode()
    names = {family.name for family in text_string_to_metric_families(text)}
    assert present <= names
    assert not absent & names
    assert "vllm:kv_cache_usage_perc" in names
