"""engines.images: one table of default engine images per engine and GPU vendor."""

from __future__ import annotations

import pytest

from tokenfleet import render
from tokenfleet.api import parse_llmservice, to_plan_request
from tokenfleet.capacity import plan
from tokenfleet.capacity.gpus import GPUS
from tokenfleet.engines.images import (
    DEFAULT_IMAGES,
    VENDORS,
    engine_image,
    gpu_vendor,
    parse_override,
    with_overrides,
)
from tokenfleet.errors import UserError


@pytest.mark.parametrize(
    ("engine", "version", "vendor", "image"),
    [
        ("vllm", "0.11.0", "nvidia", "vllm/vllm-openai:v0.11.0"),
        ("vllm", "v0.32.0", "nvidia", "vllm/vllm-openai:v0.32.0"),
        ("vllm", "0.32.0", "amd", "vllm/vllm-openai-rocm:v0.32.0"),
        ("sglang", "0.5.23", "nvidia", "lmsysorg/sglang:v0.5.23"),
        ("sglang", "0.5.23", "amd", "lmsysorg/sglang:v0.5.23-rocm720-mi30x"),
    ],
)
def test_default_image_per_engine_and_vendor(
    engine: str, version: str, vendor: str, image: str
) -> None:
    assert engine_image(engine, version, vendor) == image


def test_every_engine_has_a_row_per_vendor() -> None:
    engines = {(e, v) for e in ("vllm", "sglang") for v in VENDORS}
    # + spec.routing's picker, the AWS CLI that fetches s3:// LoRA adapters, and disaggregated
    # serving's routing sidecar
    assert set(DEFAULT_IMAGES) == engines | {
        ("epp", "cpu"),
        ("aws-cli", "cpu"),
        ("pd-sidecar", "cpu"),
    }


def test_every_catalog_gpu_has_a_vendor() -> None:
    vendors = {g.id: gpu_vendor(g.resource_name) for g in GPUS.values()}
    assert vendors["mi300x"] == "amd"
    assert vendors["h100-sxm"] == "nvidia"


@pytest.mark.parametrize(
    ("engine", "version", "field", "needle"),
    [
        ("vllm", "0.10.1", "spec.engine.version", "from 0.17.0 on"),
        ("sglang", "0.5.4", "spec.engine.version", "from 0.5.18 on"),
    ],
)
def test_old_version_on_amd_is_refused_with_the_fix(
    engine: str, version: str, field: str, needle: str
) -> None:
    with pytest.raises(UserError) as caught:
        engine_image(engine, version, "amd")
    message = str(caught.value)
    assert field in message and needle in message
    assert "spec.engine.image" in message  # the other fix
    assert "\n" not in message


def test_unknown_vendor_and_resource_are_refused() -> None:
    with pytest.raises(UserError, match="no default"):
        engine_image("vllm", "0.32.0", "intel")
    with pytest.raises(UserError, match=r"gpu\.resourceName"):
        gpu_vendor("gpu.intel.com/i915")


@pytest.mark.parametrize(
    ("text", "key", "image"),
    [
        ("vllm=mirror.local/vllm:v{version}", ("vllm", "nvidia"), "mirror.local/vllm:v0.32.0"),
        ("sglang:amd=r/sglang:pinned", ("sglang", "amd"), "r/sglang:pinned"),
    ],
)
def test_override(text: str, key: tuple[str, str], image: str) -> None:
    table = with_overrides([text])
    assert table[key].image("0.32.0") == image
    others = [k for k in DEFAULT_IMAGES if k != key]
    assert all(table[k] == DEFAULT_IMAGES[k] for k in others)


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("vllm", "expected ENGINE[:VENDOR]=IMAGE"),
        ("trtllm=x", "unknown engine 'trtllm'"),
        ("vllm:intel=x", "unknown vendor 'intel'"),
        ("vllm=a b", "no spaces"),
    ],
)
def test_bad_override(text: str, problem: str) -> None:
    with pytest.raises(UserError, match="--engine-image") as caught:
        parse_override(text)
    assert problem in str(caught.value)


def _service(engine: dict[str, object], gpu: str = "mi300x") -> dict[str, object]:
    return {
        "apiVersion": "tokenfleet.dev/v1alpha1",
        "kind": "LLMService",
        "metadata": {"name": "m", "namespace": "ns"},
        "spec": {
            "model": {"id": "meta-llama/Llama-3.1-8B"},
            "gpu": {"type": gpu},
            "engine": engine,
            "workload": {"maxModelLen": 8192},
        },
    }


def _image(body: dict[str, object], **kwargs: object) -> str:
    service = parse_llmservice(body)
    manifests = render.all(service, plan(to_plan_request(service)), **kwargs)  # type: ignore[arg-type]
    (workload,) = [m for m in manifests if m["kind"] == "Deployment"]
    return str(workload["spec"]["template"]["spec"]["containers"][0]["image"])


@pytest.mark.parametrize(
    ("engine", "gpu", "image"),
    [
        ({}, "mi300x", "vllm/vllm-openai-rocm:v"),
        ({"kind": "sglang"}, "mi300x", "-rocm720-mi30x"),
        ({}, "h100-sxm", "vllm/vllm-openai:v"),
        ({"image": "r.example/mine:1"}, "mi300x", "r.example/mine:1"),
    ],
)
def test_render_picks_the_vendor_build(engine: dict[str, object], gpu: str, image: str) -> None:
    assert image in _image(_service(engine, gpu))


def test_render_never_gives_an_amd_gpu_a_cuda_image() -> None:
    with pytest.raises(UserError, match=r"spec\.engine\.version"):
        _image(_service({"version": "0.10.1"}))


def test_render_uses_the_operators_table() -> None:
    table = with_overrides(["vllm:amd=mirror.local/rocm-vllm:{version}"])
    assert _image(_service({}), images=table).startswith("mirror.local/rocm-vllm:")
