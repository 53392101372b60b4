"""spec.engine: which inference engine runs the model, and how it is tuned."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import ConfigDict, Field, field_validator, model_validator

from tokenfleet.api.base import FREE_FORM, Rule, SpecModel, cel_rules, check

EngineKind = Literal["vllm", "sglang"]


def simulator_image() -> str:
    """The engine simulator's image (`tokenfleet sim`), as `make image` tags it."""
    from tokenfleet import __version__

    return f"{IMAGE_REPOSITORY}/engine-sim:{__version__}"


# Where `make image` tags the operator and engine-sim images (the chart's defaults too).
IMAGE_REPOSITORY = "ghcr.io/tokenfleet"


def default_image(kind: str, version: str) -> str:
    """The upstream CUDA image of an engine version: vllm/vllm-openai:v0.11.0,
    lmsysorg/sglang:v0.5.4. The table (with the ROCm rows) is engines.images."""
    from tokenfleet.engines.images import engine_image  # engines imports api's neighbours

    return engine_image(kind, version, "nvidia")


# Flags the operator sets itself, with the spec field that sets them. Passing one in
# engine.args would make the pod disagree with its plan (a TP size the GPUs were not
# sized for, a port the probes and the Service do not use), so it is refused.
OPERATOR_FLAGS: dict[str, str] = {
    **dict.fromkeys(("--port", "--host"), "remove it: the Service and probes use the engine's"),
    **dict.fromkeys(
        ("--tensor-parallel-size", "--tp-size", "--tp", "-tp"), "set spec.gpu.tensorParallelSize"
    ),
    **dict.fromkeys(
        ("--pipeline-parallel-size", "--pp-size", "--pp", "-pp"),
        "set spec.gpu.pipelineParallelSize",
    ),
    **dict.fromkeys(("--max-model-len", "--context-length"), "set spec.workload.maxModelLen"),
    **dict.fromkeys(
        ("--gpu-memory-utilization", "--mem-fraction-static"), "set spec.engine.memoryFraction"
    ),
    **dict.fromkeys(("--max-num-seqs", "--max-running-requests"), "set spec.engine.maxNumSeqs"),
    **dict.fromkeys(
        ("--max-num-batched-tokens", "--chunked-prefill-size"),
        "set spec.engine.maxNumBatchedTokens",
    ),
    "--kv-cache-dtype": "set spec.engine.kvCacheDtype",
    "--dtype": "set spec.model.dtype",
    **dict.fromkeys(("--quantization", "-q"), "set spec.model.quantization"),
    "--served-model-name": "set spec.model.servedName",
    **dict.fromkeys(("--model", "--model-path"), "set spec.model.id or spec.model.source"),
    **dict.fromkeys(
        ("--enable-prefix-caching", "--no-enable-prefix-caching", "--disable-radix-cache"),
        "set spec.engine.prefixCaching",
    ),
    "--speculative-config": "set spec.engine.speculative",
    **dict.fromkeys(
        ("--enable-expert-parallel", "-ep", "--ep-size", "--expert-parallel-size", "--ep"),
        "set spec.engine.expertParallel",
    ),
    **dict.fromkeys(
        (
            "--nnodes",
            "--node-rank",
            "--master-addr",
            "--master-port",
            "--dist-init-addr",
            "--headless",
            "--distributed-executor-backend",
        ),
        "remove it: the operator sets it for multi-node replicas",
    ),
}


def operator_flag(arg: str) -> str | None:
    """The operator flag `arg` names (--max_model_len=8 -> --max-model-len), if any."""
    flag = arg.split("=", 1)[0]
    if flag.startswith("--"):
        flag = "--" + flag[2:].replace("_", "-")
    return flag if flag in OPERATOR_FLAGS else None


def image_has_tag(image: str) -> bool:
    """registry:5000/org/name:tag or name@sha256:...: the part after the last '/' decides."""
    return "@" in image or ":" in image.rsplit("/", 1)[-1]


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
    env: list[EnvVar] = Field(
        default_factory=list,
        max_length=128,
        # A map keyed by name, as in a Pod: server-side apply merges it by name, and the
        # API server refuses duplicate names at `kubectl apply` (a real one answered 500
        # to the Deployment that carried them).
        json_schema_extra={"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"]},
    )
    """Extra environment variables of the engine container (names unique)."""
    prefix_caching: bool = True
    """Automatic prefix caching (reuse of KV blocks across requests with a common prefix)."""
    kv_cache_dtype: Literal["auto", "fp8"] = "auto"
    """KV cache element type; fp8 doubles the tokens the cache holds."""
    expert_parallel: bool = False
    """MoE models: place whole experts on the tensor-parallel ranks (vLLM
    --enable-expert-parallel, SGLang --ep-size = TP) instead of slicing every expert across
    them. Same weights per GPU; larger fused-MoE workspaces. Refused for dense models."""
    cap_long_prefills: bool = False
    """vLLM 0.32+: while other requests run or wait, prefill a long prompt at most
    --long-prefill-token-threshold tokens per step (derived from slo.tpotMs, shown in the
    plan), so a few very long prompts do not stall the short requests queued behind them.
    Helps traffic with a long tail of prompts; costs goodput on uniformly long prompts,
    which then share each step's budget. Refused for SGLang and older vLLM."""
    memory_fraction: float | None = Field(default=None, ge=0.1, le=0.99)
    """vLLM --gpu-memory-utilization / SGLang --mem-fraction-static. Default: planned."""
    max_num_seqs: int | None = Field(default=None, ge=1, le=65536)
    """vLLM --max-num-seqs / SGLang --max-running-requests. Default: planned."""
    max_num_batched_tokens: int | None = Field(default=None, ge=16, le=1048576)
    """vLLM --max-num-batched-tokens / SGLang --chunked-prefill-size. Default: planned."""
    speculative: dict[str, Any] | None = Field(default=None, json_schema_extra=FREE_FORM)
    """Speculative decoding in the engine's own words: vLLM's --speculative-config keys
    (method, model, num_speculative_tokens, ...) or SGLang's --speculative-* names
    (algorithm, draftModelPath, numSteps, ...). The planner sizes the proposer's memory and
    step cost from it and renders it only where it does not lower goodput (see
    speculativePolicy); the draft's config comes from the catalog or speculativeDraftConfig."""
    speculative_acceptance_rate: float | None = Field(default=None, ge=0.0, le=1.0)
    """Share of draft tokens the target accepts, for the plan. Default: the method's
    published prior; the autoscaler plans with the rate the engines report once they run."""
    speculative_policy: Literal["auto", "always"] = "auto"
    """auto: leave speculation off where it lowers goodput at the stated workload;
    always: render it as given."""
    speculative_draft_config: dict[str, Any] | None = Field(
        default=None, json_schema_extra=FREE_FORM
    )
    """The draft model's (or EAGLE head's) config.json, for drafts outside the catalog."""
    simulate: bool = False
    """Run the engine simulator (`tokenfleet sim`, image ghcr.io/tokenfleet/engine-sim
    unless image is set) instead of the engine: same plan, API and metrics, timed by the
    capacity model, with no GPU request and no GPU node selector. For trying the operator
    and its autoscaler on a cluster without GPUs (kind)."""

    @field_validator("args")
    @classmethod
    def _no_operator_flags(cls, args: list[str]) -> list[str]:
        for arg in args:
            flag = operator_flag(arg)
            if flag is not None:
                raise ValueError(
                    f"{arg!r} overrides a flag the operator sets from the spec and its plan; "
                    f"{OPERATOR_FLAGS[flag]}"
                )
        return args

    @field_validator("image")
    @classmethod
    def _tagged(cls, image: str | None) -> str | None:
        if image is not None and not image_has_tag(image):
            raise ValueError(
                f"{image!r} has no tag, so every node may pull a different engine build than "
                "the one planned for; pin a tag (e.g. vllm/vllm-openai:v0.11.0) or a digest "
                "and set spec.engine.version to match"
            )
        return image

    @field_validator("env")
    @classmethod
    def _unique_env(cls, env: list[EnvVar]) -> list[EnvVar]:
        names = [e.name for e in env]
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            raise ValueError(f"duplicate env names {twice}; keep one entry per name")
        return env

    def image_for(self, version: str) -> str:
        """The image to run, given the engine version the plan was made for."""
        if self.simulate:
            return self.image or simulator_image()
        return self.image or default_image(self.kind, self.version or version)
