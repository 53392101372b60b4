"""The base of every LLMService model: camelCase in YAML, snake_case in Python.

Spec models forbid unknown fields so a typo (`tensorParalelSize`) is an error instead of a
silently ignored setting. Status models (written by the operator, read back on the next
reconcile) ignore unknown fields so an older operator can read a newer operator's status.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

# Marks an int-or-string field (Kubernetes quantities, "25%"); the CRD generator turns
# the `anyOf: [integer, string]` pydantic emits into `x-kubernetes-int-or-string: true`.
INT_OR_STRING: dict[str, Any] = {"x-kubernetes-int-or-string": True}
# Marks a free-form object passed through untouched (config.json, affinity, speculative).
FREE_FORM: dict[str, Any] = {"x-kubernetes-preserve-unknown-fields": True}


class SpecModel(BaseModel):
    model_config = ConfigDict(
        alias_generator=to_camel,
        validate_by_name=True,
        validate_by_alias=True,
        serialize_by_alias=True,
        extra="forbid",
        use_attribute_docstrings=True,
        frozen=True,
    )

    def to_dict(self) -> dict[str, Any]:
        """The YAML/JSON form: camelCase keys, unset optional fields left out."""
        return self.model_dump(mode="json", by_alias=True, exclude_none=True)


class StatusModel(SpecModel):
    model_config = ConfigDict(extra="ignore", frozen=False)


def section(cls: type[BaseModel], description: str | None = None) -> Any:
    """A nested object that is always present, defaulted to `{}` in the CRD.

    `default: {}` makes the API server fill in the section's own field defaults, so
    `kubectl get -o yaml` shows the effective settings.
    """
    return Field(default_factory=cls, description=description, json_schema_extra={"default": {}})


@dataclass(frozen=True)
class Rule:
    """One cross-field rule, enforced twice with the same message.

    `cel` goes into the CRD (`x-kubernetes-validations`) so the API server rejects the
    object at `kubectl apply`; the model's validator checks the same condition in Python
    for objects that reach the operator some other way (an older CRD, a test, the CLI).
    the api unit tests check that both agree on a table of cases.
    """

    cel: str
    message: str
    fix: str

    def as_cel(self) -> dict[str, str]:
        return {"rule": self.cel, "message": f"{self.message}; {self.fix}"}


class RuleViolation(ValueError):
    """Raised by a model validator; parse_llmservice turns it into a one-line SpecError."""

    def __init__(self, rule: Rule, detail: str) -> None:
        self.rule = rule
        self.detail = detail
        super().__init__(f"{rule.message}{f' ({detail})' if detail else ''}; {rule.fix}")


class FieldRefused(ValueError):
    """Raised by a field validator whose check is more than a pattern: parse_llmservice
    names the field and the value, and adds this problem and fix."""

    def __init__(self, problem: str, fix: str) -> None:
        self.problem = problem
        self.fix = fix
        super().__init__(f"{problem}; {fix}")


def cel_rules(*rules: Rule) -> dict[str, Any]:
    return {"x-kubernetes-validations": [r.as_cel() for r in rules]}


def check(rule: Rule, ok: bool, detail: str = "") -> None:
    if not ok:
        raise RuleViolation(rule, detail)
