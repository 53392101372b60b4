"""spec.engine: which inference engine runs the model, and how it is tuned."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import ConfigDict, Field, model_validator

from tokenfleet.api.base import FREE_FORM, Rule, SpecModel, cel_rules, check

EngineKind = Literal["vllm", "sglang"]


def default_image(kind: str, version: str) -> str:
    """The upstream CUDA image of an engine version: vllm/vllm-openai:v0.11.0,
    lmsysorg/sglang:v0.5.4. The table (with the ROCm rows) is engines.images."""
    from tokenfleet.engines.images import engine_image  # engines imports api's neighbours

    return engine_image(kind, version, "nvidia")


VALUE_OR_FROM = Rule(
    "has(self.value) != has(self.valueFrom)",
    "an env entry needs exactly one of value or valueFrom",
    "set value for a literal or valueFrom for a secret / configMap / field reference",
)


class EnvVar(SpecModel):
    """An environment variable of the engine container (Kubernetes EnvVar)."""

    model_config = ConfigDict(json_schema_extra=cel_rules(VALUE_OR_FROM))

    name: str = Field(min_length=1, max_length=256, pattern=r"^[-._a-zA-Z][-._a-zA-Z0-9]*$")
    """Variable name."""
    value: str | None = None
    """Literal value."""
    value_from: dict[str, Any] | None = Field(default=None, json_schema_extra=FREE_FORM)
    """A Kubernetes EnvVarSource (secretKeyRef, configMapKeyRef, fieldRef...), passed through."""

    @model_validator(mode="after")
    def _value_or_from(self) -> EnvVar:
        check(VALUE_OR_FROM, (self.value is None) != (self.value_from is None), self.name)
        return self


class EngineSpec(SpecModel):
    """The inference engine and its settings. Leave a setting unset to let the planner pick."""

    kind: EngineKind = "vllm"
    """vllm or sglang."""
    image: str | None = Field(default=None, min_length=1, max_length=512)
    """Container image. Default: the upstream image of kind at version."""
    version: str | None = Field(default=None, max_length=64, pattern=r"^v?\d+\.\d+(\.\d+)?.*$")
    """Engine version the image runs (e.g. 0.11.0). Sets the memory profile the planner uses;
    default: the planner's newest profile for kind. Set it when you set image."""
    args: list[str] = Field(default_factory=list, max_length=128)
    """Extra command-line arguments appended after the planned ones (they win)."""
    env: list[EnvVar] = Field(default_factory=list, max_length=128)
    """Extra environment variables of the engine container."""
    prefix_caching: bool = True
    """Automatic prefix caching (reuse of KV blocks across requests with a common prefix)."""
    kv_cache_dtype: Literal["auto", "fp8"] = "auto"
    """KV cache element type; fp8 doubles the tokens the cache holds."""
    memory_fraction: float | None = Field(default=None, ge=0.1, le=0.99)
    """vLLM --gpu-memory-utilization / SGLang --mem-fraction-static. Default: planned."""
    max_num_seqs: int | None = Field(default=None, ge=1, le=65536)
    """vLLM --max-num-seqs / SGLang --max-running-requests. Default: planned."""
    max_num_batched_tokens: int | None = Field(default=None, ge=16, le=1048576)
    """vLLM --max-num-batched-tokens / SGLang --chunked-prefill-size. Default: planned."""
    speculative: dict[str, Any] | None = Field(default=None, json_schema_extra=FREE_FORM)
    """Speculative decoding config, passed through to the engine
    (vLLM --speculative-config JSON; SGLang --speculative-* flags)."""

    def image_for(self, version: str) -> str:
        """The image to run, given the engine version the plan was made for."""
        return self.image or default_image(self.kind, self.version or version)
