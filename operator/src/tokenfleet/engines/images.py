"""Default engine images, per engine and GPU vendor, in one table. Pure.

An LLMService that sets spec.engine.image runs that image. Otherwise the image comes from
this table, keyed by (engine, vendor of the planned GPU) and tagged with the engine version
the plan was made for, so the sizing and the binary agree. The operator can replace any
row (`tokenfleet operator --engine-image vllm:amd=registry.local/vllm-rocm:v{version}`,
set by the Helm chart's `engineImages` value), e.g. to pull through a mirror.

A ROCm GPU must never get a CUDA build: where no ROCm image exists for the version (AMD's
own rocm/vllm tags carry a ROCm version and a date, so they cannot be derived from the
vLLM version), resolution fails with the fix instead of rendering a pod that cannot start.

Public names: ImageRule, ImageTable, DEFAULT_IMAGES, VENDORS, gpu_vendor(resource_name),
engine_image(engine, version, vendor, table), picker_image(table), parse_override(text),
with_overrides(...).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from tokenfleet.capacity.engine_profiles import parse_version
from tokenfleet.errors import UserError

VERSION = "{version}"  # placeholder in an image template: the engine version without a 'v'


@dataclass(frozen=True)
class ImageRule:
    """An image template; `{version}` is replaced by the engine version (e.g. 0.11.0)."""

    template: str
    since: str | None = None  # first engine version published under this template

    def image(self, version: str) -> str:
        return self.template.replace(VERSION, version.removeprefix("v"))


ImageTable = Mapping[tuple[str, str], ImageRule]

# The endpoint picker of spec.routing (llm-d/llm-d-router, tag v0.10.0: its Dockerfile.epp
# builds ghcr.io/llm-d/llm-d-router-endpoint-picker, config/charts/routerlib/values.yaml).
# It runs on CPU, so its row's "vendor" is cpu; the flags, config format and metric names
# render/routing/ uses are those of this version.
PICKER = "epp"
PICKER_VERSION = "0.10.0"
# llm-d's routing sidecar for disaggregated serving, on decode pods (render/routing/
# sidecar.py): the same repository and release as the picker (llm-d/llm-d-router v0.10.0,
# Dockerfile.sidecar; .github/workflows/ci-release.yaml pushes `<repo>-disagg-sidecar` with
# the git tag), so the two speak the same headers.
SIDECAR = "pd-sidecar"

# The AWS CLI copies s3:// LoRA adapters into the model cache before the engine starts
# (render/adapters.py, static loading); the official image, tags per CLI release.
FETCH_TOOLS = {"aws-cli": "2.17.0"}
VENDORS = ("nvidia", "amd")
# Device-plugin resource name -> vendor (capacity.gpus.GPU.resource_name).
_RESOURCE_VENDORS = {"nvidia.com/gpu": "nvidia", "amd.com/gpu": "amd"}

DEFAULT_IMAGES: ImageTable = {
    # vLLM's official CUDA image (docs.vllm.ai, deployment/docker): tags v<version>.
    ("vllm", "nvidia"): ImageRule("vllm/vllm-openai:v{version}"),
    # vLLM's official ROCm image (docs.vllm.ai, installation/gpu ROCm "pre-built images");
    # v0.17.0 is the oldest tag we found published there (earlier ROCm builds are AMD's
    # date-stamped rocm/vllm and rocm/vllm-dev tags).
    ("vllm", "amd"): ImageRule("vllm/vllm-openai-rocm:v{version}", since="0.17.0"),
    # SGLang's CUDA image (docs.sglang.ai, install "Method 3: docker"): tags v<version>.
    ("sglang", "nvidia"): ImageRule("lmsysorg/sglang:v{version}"),
    # SGLang's ROCm builds for MI300-class GPUs: v<version>-rocm720-mi30x, published
    # alongside each release from v0.5.18 (ROCm 7.2; older releases used rocm700/rocm630).
    ("sglang", "amd"): ImageRule("lmsysorg/sglang:v{version}-rocm720-mi30x", since="0.5.18"),
    (PICKER, "cpu"): ImageRule("ghcr.io/llm-d/llm-d-router-endpoint-picker:v{version}"),
    ("aws-cli", "cpu"): ImageRule("amazon/aws-cli:{version}"),
    (SIDECAR, "cpu"): ImageRule("ghcr.io/llm-d/llm-d-router-disagg-sidecar:v{version}"),
}


def picker_image(table: ImageTable = DEFAULT_IMAGES) -> str:
    """The endpoint picker's image (override: --engine-image epp=IMAGE)."""
    rule = table.get((PICKER, "cpu"), DEFAULT_IMAGES[(PICKER, "cpu")])
    return rule.image(PICKER_VERSION)


def fetch_image(tool: str, table: ImageTable = DEFAULT_IMAGES) -> str:
    """The image of a tool an init step runs (override: --engine-image aws-cli=IMAGE)."""
    rule = table.get((tool, "cpu"), DEFAULT_IMAGES[(tool, "cpu")])
    return rule.image(FETCH_TOOLS[tool])


def sidecar_image(table: ImageTable = DEFAULT_IMAGES) -> str:
    """The routing sidecar's image (override: --engine-image pd-sidecar=IMAGE)."""
    rule = table.get((SIDECAR, "cpu"), DEFAULT_IMAGES[(SIDECAR, "cpu")])
    return rule.image(PICKER_VERSION)


def gpu_vendor(resource_name: str) -> str:
    """The vendor of a GPU from its device-plugin resource name (nvidia.com/gpu -> nvidia)."""
    vendor = _RESOURCE_VENDORS.get(resource_name)
    if resource_name.startswith("nvidia.com/mig-"):  # a MIG slice (capacity/mig.py)
        vendor = "nvidia"
    if vendor is None:
        raise UserError(
            "gpu.resourceName",
            resource_name,
            "no engine images are known for this GPU resource",
            f"use a GPU whose resource is one of {', '.join(_RESOURCE_VENDORS)}, "
            "or set spec.engine.image",
        )
    return vendor


def engine_image(engine: str, version: str, vendor: str, table: ImageTable = DEFAULT_IMAGES) -> str:
    """The default image of `engine` at `version` for GPUs of `vendor`, or a UserError."""
    rule = table.get((engine, vendor))
    build = "ROCm" if vendor == "amd" else "CUDA" if vendor == "nvidia" else vendor
    if rule is None:
        raise UserError(
            "spec.engine.image",
            f"{engine} {version} on {vendor}",
            f"there is no default {build} image of {engine}",
            f"set spec.engine.image to a {build} build of {engine} {version}, or give the "
            f"operator one with --engine-image {engine}:{vendor}=IMAGE",
        )
    if rule.since is not None and parse_version(version) < parse_version(rule.since):
        raise UserError(
            "spec.engine.version",
            version,
            f"{rule.template.split(':')[0]} publishes {build} builds of {engine} from "
            f"{rule.since} on; an older version has no default image",
            f"set spec.engine.version to {rule.since} or newer, or set spec.engine.image "
            f"to a {build} build of {engine} {version}",
        )
    return rule.image(version)


def parse_override(text: str) -> tuple[tuple[str, str], ImageRule]:
    """ENGINE[:VENDOR]=IMAGE (IMAGE may contain {version}) -> one table row.

    Without a vendor the row is for NVIDIA, the vendor of most clusters."""
    key, sep, image = text.partition("=")
    engine, _, vendor = key.strip().partition(":")
    cpu_only = engine in (PICKER, SIDECAR) or engine in FETCH_TOOLS
    vendor = vendor or ("cpu" if cpu_only else "nvidia")
    problem = None
    if not sep or not image.strip():
        problem = "expected ENGINE[:VENDOR]=IMAGE"
    elif engine not in ("vllm", "sglang", PICKER, SIDECAR, *FETCH_TOOLS):
        problem = f"unknown engine {engine!r} (use vllm, sglang, epp, {SIDECAR} or aws-cli)"
    elif cpu_only and vendor != "cpu":
        problem = f"{engine} runs on CPU: use {engine}=IMAGE"
    elif not cpu_only and vendor not in VENDORS:
        problem = f"unknown vendor {vendor!r} (use {' or '.join(VENDORS)})"
    elif any(c.isspace() for c in image.strip()):
        problem = "an image reference has no spaces"
    if problem:
        raise UserError(
            "--engine-image",
            text,
            problem,
            "e.g. --engine-image vllm=mirror.local/vllm/vllm-openai:v{version} or "
            "--engine-image sglang:amd=lmsysorg/sglang:v0.5.23-rocm720-mi30x",
        )
    return (engine, vendor), ImageRule(image.strip())


def with_overrides(overrides: Iterable[str], table: ImageTable = DEFAULT_IMAGES) -> ImageTable:
    """`table` with the rows given as ENGINE[:VENDOR]=IMAGE strings replaced."""
    merged = dict(table)
    merged.update(parse_override(text) for text in overrides)
    return merged
