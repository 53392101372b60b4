"""The speculative flags rendered from a plan, the engine-native settings read back, and the
methods an engine release lacks refused with field, value and fix (engines/speculative.py)."""

from __future__ import annotations

import json

import pytest

from tokenfleet.capacity import PlanError, load_model
from tokenfleet.capacity.speculative import SpeculativePlan
from tokenfleet.engines.speculative import (
    SINCE,
    check_method,
    read_native,
    speculative_args,
    speculative_request,
)
from tokenfleet.errors import UserError

LLAMA_8B = load_model("meta-llama/Llama-3.1-8B")


def _plan(method: str, k: int = 3, draft: str | None = None, **kw: object) -> SpeculativePlan:
    return SpeculativePlan(
        method=method,  # type: ignore[arg-type]
        num_speculative_tokens=k,
        acceptance_rate=0.7,
        rate_source="given",
        tokens_per_step=2.5,
        draft_model=draft,
        draft_weight_bytes=0.0,
        draft_kv_bytes_per_token=0,
        crossover_batch=None,
        **kw,  # type: ignore[arg-type]
    )


def test_vllm_gets_one_json_config() -> None:
    args = speculative_args("vllm", _plan("eagle3", 4, "org/head"), "0.32.0")
    assert args[0] == "--speculative-config"
    assert json.loads(args[1]) == {
        "method": "eagle3",
        "num_speculative_tokens": 4,
        "model": "org/head",
    }


def test_old_vllm_names_mtp_deepseek_mtp() -> None:
    args = speculative_args("vllm", _plan("mtp", 1), "0.10.2")
    assert json.loads(args[1])["method"] == "deepseek_mtp"
    assert json.loads(speculative_args("vllm", _plan("mtp", 1), "0.12.0")[1])["method"] == "mtp"


def test_sglang_gets_a_chain_of_its_own_flags() -> None:
    args = speculative_args("sglang", _plan("eagle3", 3, "org/head"), "0.5.23")
    assert args == [
        "--speculative-algorithm", "EAGLE3", "--speculative-num-steps", "3",
        "--speculative-eagle-topk", "1", "--speculative-num-draft-tokens", "4",
        "--speculative-draft-model-path", "org/head",
    ]  # fmt: skip
    ngram = speculative_args("sglang", _plan("ngram", 5), "0.5.23")
    assert ngram[ngram.index("--speculative-num-draft-tokens") + 1] == "6"
    assert ngram[ngram.index("--speculative-ngram-max-bfs-breadth") + 1] == "1"


def test_a_plan_that_left_speculation_off_renders_nothing() -> None:
    assert speculative_args("vllm", _plan("eagle3", draft="x", enabled=False), "0.32.0") == []
    assert speculative_args("sglang", None, "0.5.23") == []


def test_passthrough_keys_reach_the_engine() -> None:
    sp = _plan("ngram", 4, passthrough=json.dumps({"prompt_lookup_max": 4}))
    assert json.loads(speculative_args("vllm", sp, "0.32.0")[1])["prompt_lookup_max"] == 4


@pytest.mark.parametrize(
    ("engine", "config", "want"),
    [
        ("vllm", {"method": "eagle3", "model": "m", "num_speculative_tokens": 3},
         ("eagle3", 3, "m")),
        ("vllm", {"model": "ngram", "num_speculative_tokens": 2}, ("ngram", 2, "ngram")),
        ("vllm", {"method": "deepseek_mtp", "num_speculative_tokens": 1}, ("mtp", 1, None)),
        ("vllm", {"model": "org/small", "num_speculative_tokens": 5},
         ("draft_model", 5, "org/small")),
        ("sglang", {"algorithm": "EAGLE", "draftModelPath": "h", "numSteps": 4}, ("eagle", 4, "h")),
        ("sglang", {"algorithm": "NGRAM", "numDraftTokens": 8}, ("ngram", 7, None)),
        ("sglang", {"algorithm": "NEXTN", "num_steps": 1}, ("mtp", 1, None)),
        ("sglang", {"algorithm": "STANDALONE", "draft_model_path": "d", "numSteps": 3},
         ("draft_model", 3, "d")),
    ],
)  # fmt: skip
def test_engine_native_settings_read_back(
    engine: str, config: dict[str, object], want: tuple[str, int, str | None]
) -> None:
    method, tokens, model, _ = read_native(engine, config, "spec.engine.speculative")
    assert (method, tokens, model) == want


@pytest.mark.parametrize(
    ("engine", "config", "field"),
    [
        ("sglang", {"algorithm": "EAGLE", "numSteps": 3, "eagleTopk": 4}, "eagleTopk"),
        ("sglang", {"algorithm": "MEDUSA", "numSteps": 3}, "algorithm"),
        ("vllm", {"method": "medusa", "num_speculative_tokens": 3}, "method"),
        ("vllm", {"method": "eagle3", "model": "m"}, "speculative"),
    ],
)
def test_settings_the_planner_cannot_size_are_refused(
    engine: str, config: dict[str, object], field: str
) -> None:
    with pytest.raises(PlanError) as info:
        read_native(engine, config, "spec.engine.speculative")
    assert info.value.field.endswith(field) and info.value.fix


@pytest.mark.parametrize(
    ("engine", "method", "old", "first"),
    [
        ("vllm", "eagle3", "0.9.2", "0.10.1"),
        ("vllm", "draft_model", "0.14.0", "0.15.0"),
        ("sglang", "ngram", "0.5.1", "0.5.3"),
        ("sglang", "draft_model", "0.4.9", "0.5.3"),
        ("sglang", "eagle3", "0.4.3", "0.4.6"),
    ],
)
def test_a_method_the_release_lacks_is_refused(
    engine: str, method: str, old: str, first: str
) -> None:
    with pytest.raises(PlanError) as info:
        check_method(engine, method, old, "spec.engine.speculative")
    error = info.value
    assert (error.field, error.value) == ("spec.engine.speculative", method)
    assert first in error.problem and first in error.fix
    check_method(engine, method, first, "spec.engine.speculative")  # the release that has it


def test_every_method_has_a_release_in_both_engines() -> None:
    for engine in ("vllm", "sglang"):
        for method in ("draft_model", "eagle", "eagle3", "mtp", "ngram"):
            assert (engine, method) in SINCE


def test_an_eagle_head_outside_the_catalog_is_shaped_after_the_target() -> None:
    req = speculative_request(
        "vllm", None, "eagle3", 3, LLAMA_8B, draft_ref="yuhuili/EAGLE3-LLaMA3.1-Instruct-8B"
    )
    assert req.draft is None and req.draft_model == "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B"
    draft = speculative_request(
        "vllm", None, "draft_model", 3, LLAMA_8B, draft_ref="meta-llama/Llama-3.2-1B-Instruct"
    )
    assert draft.draft is not None and draft.draft.layers == 16
    with pytest.raises(UserError) as info:
        speculative_request("vllm", None, "draft_model", 3, LLAMA_8B, draft_ref="org/unknown")
    assert info.value.field == "draft-model"
