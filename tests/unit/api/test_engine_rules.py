"""spec.engine refusals: flags the operator owns, untagged images, duplicate env names."""

from __future__ import annotations

import pytest

from tokenfleet.api import parse_llmservice
from tokenfleet.api.engine import OPERATOR_FLAGS, image_has_tag, operator_flag
from tokenfleet.errors import UserError

BASE = {
    "apiVersion": "tokenfleet.dev/v1alpha1",
    "kind": "LLMService",
    "metadata": {"name": "x", "namespace": "ns"},
    "spec": {"model": {"id": "meta-llama/Llama-3.1-8B"}, "gpu": {"type": "l4"}},
}


def parse_engine(engine: dict) -> None:
    parse_llmservice({**BASE, "spec": {**BASE["spec"], "engine": engine}})


@pytest.mark.parametrize(
    ("args", "fix"),
    [
        (["--port", "9000"], "remove it"),
        (["--tensor-parallel-size", "4"], "spec.gpu.tensorParallelSize"),
        (["--max_model_len=4096"], "spec.workload.maxModelLen"),  # vLLM's underscore form
        (["--max-model-len=4096"], "spec.workload.maxModelLen"),
        (["-tp", "2"], "spec.gpu.tensorParallelSize"),
        (["--context-length", "8192"], "spec.workload.maxModelLen"),  # SGLang's name
        (["--served-model-name", "x"], "spec.model.servedName"),
        (["--quantization", "fp8"], "spec.model.quantization"),
        (["--nnodes", "2"], "multi-node"),
    ],
)
def test_args_that_override_operator_flags_are_refused_with_the_field(
    args: list[str], fix: str
) -> None:
    with pytest.raises(UserError) as err:
        parse_engine({"args": args})
    assert "spec.engine.args" in str(err.value) and fix in str(err.value)


@pytest.mark.parametrize(
    "args", [["--load-format", "runai_streamer"], ["--enable-chunked-prefill"], ["--port-x"]]
)
def test_other_args_pass(args: list[str]) -> None:
    parse_engine({"args": args})


def test_every_operator_flag_is_recognised() -> None:
    assert all(operator_flag(flag) == flag for flag in OPERATOR_FLAGS)


@pytest.mark.parametrize(
    ("image", "tagged"),
    [
        ("vllm/vllm-openai:v0.11.0", True),
        ("registry.local:5000/vllm/vllm-openai:v0.11.0", True),
        ("vllm/vllm-openai@sha256:" + "a" * 64, True),
        ("vllm/vllm-openai", False),
        ("registry.local:5000/vllm/vllm-openai", False),
    ],
)
def test_images_need_a_tag_or_digest(image: str, tagged: bool) -> None:
    assert image_has_tag(image) is tagged
    if tagged:
        parse_engine({"image": image, "version": "0.11.0"})
    else:
        with pytest.raises(UserError, match=r"spec\.engine\.image.*no tag.*pin a tag"):
            parse_engine({"image": image})


def test_duplicate_env_names_are_refused() -> None:
    env = [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}, {"name": "A", "value": "3"}]
    with pytest.raises(UserError, match=r"spec\.engine\.env.*duplicate env names \['A'\]"):
        parse_engine({"env": env})
