"""What the engines' KV connectors accept for a prefill / decode pair, by version."""

from __future__ import annotations

import pytest

from tokenfleet.capacity import PlanError, load_model
from tokenfleet.capacity.disagg.rules import check_pair, check_version, pair_problem

LLAMA_8B = load_model("meta-llama/Llama-3.1-8B")  # 8 KV heads
DEEPSEEK = load_model("deepseek-ai/DeepSeek-V3")  # MLA


@pytest.mark.parametrize(
    ("engine", "version", "arch", "p", "d", "accepted"),
    [
        ("vllm", "0.32.0", LLAMA_8B, 2, 4, True),  # several decode ranks read one prefill rank
        ("vllm", "0.32.0", LLAMA_8B, 4, 2, True),  # 0.32 reads several prefill ranks per rank
        ("vllm", "0.20.0", LLAMA_8B, 4, 2, False),  # older: "Decode TP cannot be smaller"
        ("vllm", "0.32.0", load_model("Qwen/Qwen2.5-7B"), 8, 4, False),  # 4 KV heads replicated
        ("vllm", "0.32.0", DEEPSEEK, 8, 4, True),  # MLA: the latent is whole on every rank
        ("vllm", "0.32.0", LLAMA_8B, 2, 3, False),  # sizes that do not divide each other
        ("sglang", "0.5.23", LLAMA_8B, 2, 4, False),  # SGLang: equal TP without MLA
        ("sglang", "0.5.23", LLAMA_8B, 4, 4, True),
        ("sglang", "0.5.23", DEEPSEEK, 4, 8, True),
    ],
)  # fmt: skip
def test_pairs(engine: str, version: str, arch: object, p: int, d: int, accepted: bool) -> None:
    problem = pair_problem(arch, engine, version, p, d)  # type: ignore[arg-type]
    assert (problem is None) is accepted, problem


def test_refused_pair_names_field_value_and_fix() -> None:
    with pytest.raises(PlanError) as e:
        check_pair(LLAMA_8B, "vllm", "0.20.0", 4, 2, field="spec.serving.decode.tensorParallelSize")
    assert e.value.field == "spec.serving.decode.tensorParallelSize"
    assert e.value.value == 2
    assert "use decode TP 4" in e.value.fix


@pytest.mark.parametrize(
    ("engine", "version", "ok"),
    [("vllm", "0.11.0", False), ("vllm", "0.12.0", True), ("vllm", None, True),
     ("sglang", "0.4.3", False), ("sglang", "0.5.23", True)],
)  # fmt: skip
def test_versions_without_what_pd_needs_are_refused(
    engine: str, version: str | None, ok: bool
) -> None:
    if ok:
        check_version(engine, version)
        return
    with pytest.raises(PlanError) as e:
        check_version(engine, version, "spec.engine.version")
    assert e.value.field == "spec.engine.version" and "or newer" in e.value.fix
