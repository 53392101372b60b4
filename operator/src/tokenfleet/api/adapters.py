"""spec.adapters and spec.lora: LoRA adapters served on top of the base model.

Each adapter is a model name clients send (`"model": "<name>"` in an OpenAI request) and the
place its weights come from. The engine preallocates GPU slots for them at start-up
(capacity/lora.py sizes those, and the KV cache they displace); `spec.lora` sets the slots,
or leaves them to the planner. `loading: dynamic` (the default) adds and removes adapters on
running pods through the engine's load / unload endpoints (controller/adapters.py), so a
change to `spec.adapters` restarts nothing; `static` lists them on the engine's command line,
from files an init step places in the model cache (render/adapters.py).
"""

from __future__ import annotations

import re
from typing import Literal

from pydantic import ConfigDict, Field, field_validator

from tokenfleet.api.base import FieldRefused, Rule, SpecModel, cel_rules, check
from tokenfleet.api.model import NAME_PATTERN, SecretKeyRef
from tokenfleet.capacity.engine_profiles import engine_facts

# An adapter's name is a served model name, a path component of its files and an entry of
# vLLM's comma-separated `running_lora_adapters` metric label: no commas, colons (SGLang's
# base:adapter syntax) or slashes.
ADAPTER_NAME = r"^[A-Za-z0-9]([A-Za-z0-9._-]*[A-Za-z0-9])?$"
MAX_ADAPTERS = 256
SCHEMES = ("hf", "s3", "pvc")
SOURCE_FORMS = "hf://org/repo[@revision], s3://bucket/prefix or pvc://claim/path"
# The forms each scheme takes; one copy for the CRD's CEL rule (RE2) and Python's re.
HF_FORM = r"hf://([A-Za-z0-9][A-Za-z0-9_.-]*)/([A-Za-z0-9_.-]+)(@([A-Za-z0-9_./-]+))?"
S3_FORM = r"s3://([a-z0-9][a-z0-9.-]{1,61}[a-z0-9])(/[^ ]*)?"
PVC_FORM = r"pvc://([a-z0-9]([-a-z0-9.]*[a-z0-9])?)(/[^ ]*)?"
_HF, _S3, _PVC = (re.compile(f"^{form}$") for form in (HF_FORM, S3_FORM, PVC_FORM))
TargetModule = Literal[
    "q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj",
    "embed_tokens", "lm_head",
]  # fmt: skip


class CredentialsRef(SpecModel):
    """A Secret in the LLMService's namespace whose keys become environment variables of the
    step that fetches the adapter (for s3://: AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY and
    optionally AWS_SESSION_TOKEN, AWS_REGION, AWS_ENDPOINT_URL)."""

    name: str = Field(min_length=1, max_length=253, pattern=NAME_PATTERN)
    """Secret name."""


KNOWN_SCHEME = Rule(
    f"self.source.matches('^({HF_FORM}|{S3_FORM}|{PVC_FORM})$')",
    "unknown source scheme or form",
    f"use {SOURCE_FORMS}",
)


class AdapterSpec(SpecModel):
    """One LoRA adapter of the base model."""

    model_config = ConfigDict(json_schema_extra=cel_rules(KNOWN_SCHEME))

    name: str = Field(min_length=1, max_length=128, pattern=ADAPTER_NAME)
    """The model name clients send to use it (unique; not the base model's served name)."""
    source: str = Field(min_length=6, max_length=2048)
    """Where its files are: hf://org/repo[@revision] (the Hugging Face Hub),
    s3://bucket/prefix, or pvc://claim/path (a PersistentVolumeClaim, mounted read-only)."""
    rank: int | None = Field(default=None, ge=1, le=512)
    """Its LoRA rank (r in adapter_config.json); sizes the slots when spec.lora.maxRank is
    unset. Unset: assumed to fit spec.lora.maxRank."""
    pinned: bool = False
    """Keep it in a GPU slot, never evicted for another adapter (SGLang only)."""
    token_secret_ref: SecretKeyRef | None = None
    """Hub token for a gated or private hf:// repository. Default: the model's."""
    credentials_secret_ref: CredentialsRef | None = None
    """Credentials of an s3:// source, as environment variables of the fetch step."""

    @field_validator("source")
    @classmethod
    def _known_scheme(cls, source: str) -> str:
        scheme = source.split("://", 1)[0] if "://" in source else ""
        if scheme not in SCHEMES:
            raise FieldRefused(
                f"unknown source scheme or form ({scheme + '://' if scheme else 'no scheme'})",
                f"use {SOURCE_FORMS}",
            )
        pattern = {"hf": _HF, "s3": _S3, "pvc": _PVC}[scheme]
        if not pattern.match(source):
            raise FieldRefused(
                f"unknown source scheme or form (not a valid {scheme}:// source)",
                f"use {SOURCE_FORMS}",
            )
        return source

    @property
    def scheme(self) -> str:
        return self.source.split("://", 1)[0]

    @property
    def revision(self) -> str | None:
        match = _HF.match(self.source)
        return match.group(4) if match else None

    @property
    def hub_repo(self) -> str | None:
        match = _HF.match(self.source)
        return f"{match.group(1)}/{match.group(2)}" if match else None

    @property
    def claim(self) -> tuple[str, str] | None:
        """(claim name, path inside it) of a pvc:// source."""
        match = _PVC.match(self.source)
        return (match.group(1), (match.group(3) or "/").lstrip("/")) if match else None


class LoraSpec(SpecModel):
    """How the engine serves adapters: its GPU slots and how adapters are loaded."""

    max_loras: int | None = Field(default=None, ge=1, le=256)
    """Adapters on the GPU at once (vLLM --max-loras; SGLang --max-loras-per-batch is one
    more, for the base model's requests). Unset: the planner chooses from the adapters
    listed, within the memory the workload leaves."""
    max_rank: int | None = Field(default=None, ge=1, le=512)
    """Largest adapter rank the slots hold (--max-lora-rank; vLLM takes 1, 8, 16, 32, 64,
    128, 256, 320 or 512). Unset: the largest rank listed, else 16."""
    max_cpu_loras: int | None = Field(default=None, ge=1, le=4096)
    """Adapters kept in host memory (vLLM --max-cpu-loras, SGLang --max-loaded-loras); at
    least maxLoras. Unset: the engine's default."""
    loading: Literal["static", "dynamic"] = "dynamic"
    """dynamic: the operator loads and unloads adapters on running pods (no restart);
    static: the engine loads them at start-up (a change restarts the pods)."""
    target_modules: list[TargetModule] | None = Field(default=None, min_length=1)
    """Modules that get LoRA slots. Unset: all the engine supports (vLLM's default, SGLang's
    `all`), which is what adapters trained on all linear layers need."""


def _base_name_rule() -> Rule:
    return Rule(
        "!has(self.adapters) || self.adapters.all(a, a.name != "
        "(has(self.model.servedName) ? self.model.servedName : self.model.id))",
        "spec.adapters[].name must differ from the base model's served name "
        "(spec.model.servedName, default spec.model.id)",
        "rename the adapter",
    )


BASE_NAME = _base_name_rule()
# In the CRD the list is a map keyed by name (the API server refuses a duplicate without a
# quadratic CEL rule); the Python check gives the same refusal to what slips past it.
UNIQUE_NAMES = Rule("true", "spec.adapters[].name must be unique", "rename or remove the duplicate")
RANK_WITHIN_MAX = Rule(
    "!has(self.adapters) || !has(self.lora) || !has(self.lora.maxRank) || "
    "self.adapters.all(a, !has(a.rank) || a.rank <= self.lora.maxRank)",
    "an adapter's rank is above spec.lora.maxRank (the slots hold ranks up to maxRank)",
    "raise spec.lora.maxRank to the adapter's rank, or leave maxRank unset",
)
PINNED_WITHIN_SLOTS = Rule(
    "!has(self.adapters) || !has(self.lora) || !has(self.lora.maxLoras) || "
    "self.adapters.filter(a, has(a.pinned) && a.pinned).size() <= self.lora.maxLoras",
    "more pinned adapters than spec.lora.maxLoras GPU slots (a pinned adapter keeps its slot)",
    "raise spec.lora.maxLoras or pin fewer adapters",
)
DYNAMIC_SOURCES = Rule(
    "!has(self.adapters) || (has(self.lora) && has(self.lora.loading) && "
    "self.lora.loading == 'static') || self.adapters.all(a, a.source.startsWith('pvc://') || "
    "(a.source.startsWith('hf://') && !a.source.contains('@')))",
    "dynamic loading takes pvc:// sources and hf:// without a revision (a running engine "
    "loads a local path or a Hub repo id; s3:// and pinned revisions are fetched by the "
    "init step of static loading)",
    "set spec.lora.loading: static, or copy the adapter to a PVC or the Hub",
)
PINNED_NEEDS_SGLANG = Rule(
    "!has(self.adapters) || (has(self.engine.kind) && self.engine.kind == 'sglang') || "
    "!self.adapters.exists(a, has(a.pinned) && a.pinned)",
    "pinned adapters need spec.engine.kind: sglang (vLLM's server has no way to pin one)",
    "set pinned: false, or use SGLang",
)
# Python only (a Degraded condition): comparing Secret references across sections.
ONE_HUB_TOKEN = Rule(
    "true",
    "with dynamic loading the engine downloads hf:// adapters itself, with its one Hub token "
    "(spec.model.source.huggingFace.tokenSecretRef)",
    "give the adapters the model's tokenSecretRef (or none), or set spec.lora.loading: static",
)
ADAPTER_RULES = (
    BASE_NAME,
    RANK_WITHIN_MAX,
    PINNED_WITHIN_SLOTS,
    DYNAMIC_SOURCES,
    PINNED_NEEDS_SGLANG,
)


def check_adapters(
    adapters: list[AdapterSpec],
    lora: LoraSpec | None,
    served_name: str,
    engine: str,
    model_token: SecretKeyRef | None = None,
) -> None:
    """The cross-field rules of ADAPTER_RULES, in Python (the CRD holds the same in CEL)."""
    if not adapters:
        return
    for a in adapters:
        check(BASE_NAME, a.name != served_name, f"name={a.name}")
    names = [a.name for a in adapters]
    dupes = sorted({n for n in names if names.count(n) > 1})
    check(UNIQUE_NAMES, not dupes, f"name={dupes[0]}" if dupes else "")
    if lora is not None and lora.max_rank is not None:
        over = [a for a in adapters if a.rank is not None and a.rank > lora.max_rank]
        detail = f"{over[0].name} rank={over[0].rank}, maxRank={lora.max_rank}" if over else ""
        check(RANK_WITHIN_MAX, not over, detail)
    pinned = sum(a.pinned for a in adapters)
    if lora is not None and lora.max_loras is not None:
        check(PINNED_WITHIN_SLOTS, pinned <= lora.max_loras, f"{pinned} > {lora.max_loras}")
    if lora is None or lora.loading == "dynamic":
        fetched = [a for a in adapters if a.scheme == "s3" or a.revision is not None]
        detail = f"{fetched[0].name}: {fetched[0].source}" if fetched else ""
        check(DYNAMIC_SOURCES, not fetched, detail)
    first_pinned = next((a.name for a in adapters if a.pinned), "")
    check(
        PINNED_NEEDS_SGLANG,
        engine_facts(engine).lora_pinning or not pinned,
        f"{first_pinned} pinned",
    )
    if lora is None or lora.loading == "dynamic":
        refs = {(r.name, r.key) for r in [model_token] if r is not None}
        refs |= {
            (a.token_secret_ref.name, a.token_secret_ref.key)
            for a in adapters
            if a.scheme == "hf" and a.token_secret_ref is not None
        }
        check(ONE_HUB_TOKEN, len(refs) <= 1, ", ".join(f"{n}/{k}" for n, k in sorted(refs)))


def engine_hub_token(
    adapters: list[AdapterSpec], model_token: SecretKeyRef | None
) -> SecretKeyRef | None:
    """The Hub token the engine holds: the model's, else the one the hf:// adapters name
    (check_adapters made sure they agree under dynamic loading)."""
    if model_token is not None:
        return model_token
    return next(
        (a.token_secret_ref for a in adapters if a.scheme == "hf" and a.token_secret_ref), None
    )
