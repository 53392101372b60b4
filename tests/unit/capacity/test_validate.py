"""check_request: inputs plan() would accept but no real deployment can have."""

from __future__ import annotations

import pytest

from tokenfleet.capacity import PlanError, PlanRequest, get_gpu, load_model
from tokenfleet.capacity.validate import CLI_NAMES, check_request

LLAMA = load_model("meta-llama/Llama-3.1-8B")  # bf16, 131,072-token context
GPT_OSS = load_model("openai/gpt-oss-120b")  # mxfp4 checkpoint


def req(arch=LLAMA, **kw) -> PlanRequest:
    return PlanRequest(arch=arch, gpu=get_gpu("h100-sxm"), **kw)


@pytest.mark.parametrize(
    "request_,field,fragment",
    [
        (req(input_tokens=10_000_000), "input-tokens", "131,072-token context"),
        (req(input_tokens=131_000, output_tokens=300), "input-tokens", "131,000 input + 300"),
        (req(output_tokens=200_000), "output-tokens", "exceed"),
        # vLLM refuses a --max-model-len beyond max_position_embeddings: a crash-looping pod
        (req(max_model_len=200_000), "max-model-len", "exceeds the 131,072-token context"),
        (req(input_tokens=200_000, max_model_len=262_144), "max-model-len", "to 131,072 or less"),
        (req(engine_version="99.0"), "engine-version", "newest: 0.32"),
        (req(engine_version="0.33.0"), "engine-version", "--engine-version 0.32.0"),
        (req(engine="sglang", engine_version="0.6.0"), "engine-version", "newest: 0.5"),
        (req(quantization="awq"), "quantization", "unquantized"),
        (req(quantization="gptq_marlin"), "quantization", "--quantization fp8"),
        (req(quantization="fbgemm_fp8"), "quantization", "checkpoint stored in fbgemm_fp8"),
        (req(GPT_OSS, quantization="fp8"), "quantization", "which is mxfp4"),
        (req(GPT_OSS, quantization="awq"), "quantization", "which is mxfp4"),
    ],
)
def test_refused_with_the_field_and_the_fix(request_, field, fragment):
    with pytest.raises(PlanError) as error:
        check_request(request_)
    assert error.value.field == field
    assert fragment in str(error.value)


@pytest.mark.parametrize(
    "request_",
    [
        req(),
        req(input_tokens=130_000, output_tokens=1072),  # exactly the context
        req(engine_version="0.32.9"),
        req(engine_version="0.9.2"),
        req(engine="sglang", engine_version="0.5.30"),
        req(quantization="fp8"),  # quantized while loading
        req(quantization="none"),
        req(GPT_OSS, quantization="mxfp4"),
    ],
)
def test_accepted(request_):
    check_request(request_)


def test_names_are_the_callers():
    names = {**CLI_NAMES, "engine_version": "spec.engine.version"}
    with pytest.raises(PlanError) as error:
        check_request(req(engine_version="99.0"), names)
    assert error.value.field == "spec.engine.version"
    assert "use spec.engine.version 0.32.0" in error.value.fix
