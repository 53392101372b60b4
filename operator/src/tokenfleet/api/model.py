"""spec.model: which model to serve, where its weights come from, and its architecture."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import ConfigDict, Field, model_validator

from tokenfleet.api.base import FREE_FORM, Rule, SpecModel, cel_rules, check

Dtype = Literal["auto", "bfloat16", "float16", "float32"]
# The quantization methods the capacity model knows (tokenfleet.capacity.quantization);
# a unit test keeps the two lists equal.
Quantization = Literal[
    "none",
    "awq",
    "awq_marlin",
    "compressed-tensors",
    "fbgemm_fp8",
    "fp8",
    "gptq",
    "gptq_marlin",
    "mxfp4",
]

NAME_PATTERN = r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$"  # a Kubernetes object name (RFC 1123)


class SecretKeyRef(SpecModel):
    """A key in a Secret in the LLMService's namespace."""

    name: str = Field(min_length=1, max_length=253, pattern=NAME_PATTERN)
    """Secret name."""
    key: str = Field(default="HF_TOKEN", min_length=1, max_length=253)
    """Key inside the Secret."""


class ConfigMapKeyRef(SpecModel):
    """A key in a ConfigMap in the LLMService's namespace."""

    name: str = Field(min_length=1, max_length=253, pattern=NAME_PATTERN)
    """ConfigMap name."""
    key: str = Field(default="config.json", min_length=1, max_length=253)
    """Key holding the model's Hugging Face config.json."""


class HuggingFaceSource(SpecModel):
    """Download the weights from the Hugging Face Hub at startup."""

    repo: str | None = Field(default=None, min_length=1, max_length=256)
    """Repository id (org/name). Default: spec.model.id."""
    revision: str | None = Field(default=None, min_length=1, max_length=256)
    """Branch, tag or commit. Default: the repository's default branch."""
    token_secret_ref: SecretKeyRef | None = None
    """Secret holding a Hub token, for gated models (Llama, Gemma)."""


class PvcSource(SpecModel):
    """Weights already on a PersistentVolumeClaim, mounted read-only."""

    claim_name: str = Field(min_length=1, max_length=253, pattern=NAME_PATTERN)
    """PersistentVolumeClaim name."""
    path: str = Field(default="/", min_length=1, max_length=1024)
    """Directory inside the volume that holds config.json and the weights."""


EXACTLY_ONE_SOURCE = Rule(
    "(has(self.huggingFace) ? 1 : 0) + (has(self.pvc) ? 1 : 0) + (has(self.uri) ? 1 : 0) == 1",
    "source must set exactly one of huggingFace, pvc or uri",
    "keep one and delete the others (or drop source to download spec.model.id from the Hub)",
)


class ModelSource(SpecModel):
    """Where the weights come from: exactly one of huggingFace, pvc, uri."""

    model_config = ConfigDict(json_schema_extra=cel_rules(EXACTLY_ONE_SOURCE))

    hugging_face: HuggingFaceSource | None = None
    """Hugging Face Hub repository."""
    pvc: PvcSource | None = None
    """A PersistentVolumeClaim that already holds the weights."""
    uri: str | None = Field(
        default=None,
        min_length=1,
        max_length=2048,
        pattern=r"^(s3|gs|oci|https?|hf)://.+",
    )
    """Object store or registry URI the engine loads from: s3://, gs://, oci://, https://."""

    @model_validator(mode="after")
    def _exactly_one(self) -> ModelSource:
        given = [k for k in ("huggingFace", "pvc", "uri") if getattr(self, _snake(k)) is not None]
        check(EXACTLY_ONE_SOURCE, len(given) == 1, f"got {', '.join(given) or 'none'}")
        return self


CONFIG_OR_REF = Rule(
    "!(has(self.config) && has(self.configMapRef))",
    "config and configMapRef are mutually exclusive",
    "keep one of them",
)


class ModelSpec(SpecModel):
    """The model to serve."""

    model_config = ConfigDict(json_schema_extra=cel_rules(CONFIG_OR_REF))

    id: str = Field(min_length=1, max_length=256)
    """Hugging Face model id (org/name). Picks the built-in architecture catalog entry
    unless config or configMapRef is given, and is the default download repo."""
    config: dict[str, Any] | None = Field(default=None, json_schema_extra=FREE_FORM)
    """The model's Hugging Face config.json, inline (for models outside the catalog)."""
    config_map_ref: ConfigMapKeyRef | None = None
    """A ConfigMap key holding the model's config.json."""
    source: ModelSource | None = None
    """Where to load the weights from. Default: huggingFace with repo = id."""
    served_name: str | None = Field(default=None, min_length=1, max_length=256)
    """Model name clients send in OpenAI requests. Default: id."""
    dtype: Dtype = "auto"
    """Activation / weight dtype; auto takes the checkpoint's."""
    quantization: Quantization | None = None
    """Weight quantization; default: read from the checkpoint's quantization_config."""

    @model_validator(mode="after")
    def _config_or_ref(self) -> ModelSpec:
        check(CONFIG_OR_REF, self.config is None or self.config_map_ref is None)
        return self

    @property
    def effective_source(self) -> ModelSource:
        return self.source or ModelSource(hugging_face=HuggingFaceSource(repo=self.id))

    @property
    def effective_served_name(self) -> str:
        return self.served_name or self.id


def _snake(camel: str) -> str:
    return "".join(f"_{c.lower()}" if c.isupper() else c for c in camel)
