"""Turn an LLMService body into the model, or into one line a person can act on.

The CRD schema and CEL rules stop most bad input at `kubectl apply`; what still reaches
the operator (an older CRD, a disabled webhook, a test) fails here with the field path,
the value and the fix, which the controller puts into the Degraded condition.
"""

from __future__ import annotations

import difflib
import types
import typing
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ValidationError

from tokenfleet.api.base import FieldRefused, RuleViolation
from tokenfleet.api.spec import LLMService
from tokenfleet.errors import UserError

MAX_SHOWN = 3  # errors spelled out in one message; the rest are counted
_UNION_TAGS = {"int", "str", "float", "bool", "list", "dict", "none", "lax-or-strict"}


class SpecError(UserError):
    """An LLMService that does not validate. `errors` holds every problem as one line each;
    str() is the first few joined on one line."""

    def __init__(self, errors: list[str], field: str, value: object, problem: str, fix: str):
        super().__init__(field, value, problem, fix)
        self.errors = errors
        shown = " | ".join(errors[:MAX_SHOWN])
        more = len(errors) - MAX_SHOWN
        self.args = (shown + (f" (and {more} more)" if more > 0 else ""),)

    def __str__(self) -> str:
        return str(self.args[0])


def parse_llmservice(body: Mapping[str, Any]) -> LLMService:
    try:
        return LLMService.model_validate(_plain(body))
    except ValidationError as e:
        raise spec_error(e) from None


def spec_error(error: ValidationError) -> SpecError:
    lines: list[str] = []
    first: tuple[str, object, str, str] | None = None
    seen: set[str] = set()
    for err in error.errors():
        loc = [p for p in err["loc"] if not (isinstance(p, str) and _is_tag(p))]
        path = _path(loc)
        if path in seen:  # a union (int | str) reports each member; one line is enough
            continue
        seen.add(path)
        field, value, problem, fix = _describe(err, loc, path)
        first = first or (field, value, problem, fix)
        if isinstance((err.get("ctx") or {}).get("error"), RuleViolation):
            # A cross-field rule: the value is several fields, named in the detail.
            detail = f" ({value})" if value != "-" else ""
            lines.append(f"{field}: {problem}{detail}; {fix}")
        else:
            lines.append(f"{field}={value}: {problem}; {fix}")
    assert first is not None
    return SpecError(lines, *first)


def _describe(err: Any, loc: list[Any], path: str) -> tuple[str, object, str, str]:
    kind, ctx, value = err["type"], err.get("ctx") or {}, _show(err.get("input"))
    leaf = str(loc[-1]) if loc else "spec"
    if isinstance(ctx.get("error"), RuleViolation):
        violation: RuleViolation = ctx["error"]
        return path, violation.detail or "-", violation.rule.message, violation.rule.fix
    if isinstance(ctx.get("error"), FieldRefused):
        refused: FieldRefused = ctx["error"]
        return path, value, refused.problem, refused.fix
    if kind == "missing":
        return path, "<missing>", "required field is missing", f"set {leaf}"
    if kind == "extra_forbidden":
        known = _known_fields(loc[:-1])
        close = difflib.get_close_matches(leaf, known, n=1, cutoff=0.6)
        hint = f"did you mean {close[0]}?" if close else f"known fields: {', '.join(known)}"
        return path, value, "unknown field", f"remove it ({hint})"
    if kind in ("literal_error", "enum"):
        expected = str(ctx.get("expected", ""))
        options = [o.strip().strip("'") for o in expected.replace(" or ", ", ").split(",")]
        close = difflib.get_close_matches(str(err.get("input")), options, n=2, cutoff=0.5)
        hint = f"did you mean {' or '.join(close)}? " if close else ""
        return path, value, "not an allowed value", f"{hint}use one of {', '.join(options)}"
    limits = {
        "greater_than": ">",
        "greater_than_equal": ">=",
        "less_than": "<",
        "less_than_equal": "<=",
    }
    if kind in limits:
        op = limits[kind]
        limit = next(iter(ctx.values()))
        return path, value, f"must be {op} {limit}", f"use a value {op} {limit}"
    if kind == "string_pattern_mismatch":
        return path, value, f"does not match {ctx.get('pattern')}", "fix the format"
    if kind in ("string_too_short", "string_too_long", "too_short", "too_long"):
        return path, value, _lower(err["msg"]), "change its length"
    if kind.endswith(("_type", "_parsing")):
        return (
            path,
            value,
            _lower(err["msg"]),
            "fix its type (see `kubectl explain llmservice.spec`)",
        )
    return path, value, _lower(err["msg"]), "fix the value"


def _path(loc: list[Any]) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "<object>"


def _is_tag(part: str) -> bool:
    return part in _UNION_TAGS or "[" in part or part.startswith("function-")


def _show(value: Any) -> str:
    text = "<missing>" if value is None else repr(value) if isinstance(value, str) else str(value)
    text = " ".join(text.split())
    return text if len(text) <= 60 else text[:57] + "..."


def _lower(msg: str) -> str:
    msg = msg.replace("Input should be", "must be").replace("Value error, ", "")
    return msg[:1].lower() + msg[1:]


def _plain(value: Any) -> Any:
    """kopf hands over Body / Spec views; pydantic wants plain dicts and lists."""
    if isinstance(value, Mapping):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


def _known_fields(loc: list[Any]) -> list[str]:
    """The camelCase field names of the model at `loc` (for "did you mean")."""
    model: Any = LLMService
    for part in loc:
        if isinstance(part, int):
            continue
        fields = getattr(model, "model_fields", None)
        if not fields:
            return []
        info = next((f for n, f in fields.items() if part in (n, f.alias)), None)
        if info is None:
            return []
        model = _inner_model(info.annotation)
    fields = getattr(model, "model_fields", {})
    return [f.alias or n for n, f in fields.items()]


def _inner_model(annotation: Any) -> Any:
    """X, X | None, list[X] -> X when X is a model."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    if typing.get_origin(annotation) in (typing.Union, types.UnionType, list):
        for arg in typing.get_args(annotation):
            found = _inner_model(arg)
            if found is not None:
                return found
    return None
