"""An offline stand-in for what the API server does with our CRD (no kube-apiserver here).

- structural_problems(schema): the "structural schema" rules of apiextensions.k8s.io/v1
  (every node typed, no $ref / definitions / anyOf / uniqueItems, additionalProperties never
  next to properties, defaults valid, list-map keys required, CEL rules compile).
- CrdValidator(crd).errors(obj): defaulting, then OpenAPI validation with unknown fields
  rejected (what `kubectl apply` does with server-side strict field validation), then every
  x-kubernetes-validations rule evaluated with cel-python, `self` bound to the object at
  that node. Messages start with the field path, like the API server's.
"""

from __future__ import annotations

import copy
import re
from functools import cache
from typing import Any

import celpy
import jsonschema

FORBIDDEN = ("$ref", "definitions", "$schema", "id", "dependencies", "patternProperties")
FORBIDDEN += ("additionalItems", "allOf", "oneOf", "not", "anyOf")
MARKERS = ("x-kubernetes-int-or-string", "x-kubernetes-preserve-unknown-fields")
JSON_TYPES = {"string": str, "integer": int, "number": (int, float), "boolean": bool}


@cache
def _program(rule: str) -> Any:
    env = celpy.Environment()
    return env.program(env.compile(rule))


def structural_problems(schema: dict[str, Any], path: str = "") -> list[str]:
    problems: list[str] = []
    where = path or "<root>"
    if not schema.get("type") and not any(schema.get(m) for m in MARKERS):
        problems.append(f"{where}: no type")
    if schema.get("x-kubernetes-int-or-string") and "type" in schema:
        problems.append(f"{where}: int-or-string must not set type")
    for key in FORBIDDEN:
        if key in schema:
            problems.append(f"{where}: forbidden keyword {key}")
    if schema.get("uniqueItems"):
        problems.append(f"{where}: uniqueItems is forbidden")
    if "properties" in schema and "additionalProperties" in schema:
        problems.append(f"{where}: additionalProperties together with properties")
    if schema.get("type") == "array" and "items" not in schema:
        problems.append(f"{where}: array without items")
    if "exclusiveMinimum" in schema and not isinstance(schema["exclusiveMinimum"], bool):
        problems.append(f"{where}: exclusiveMinimum must be a boolean in OpenAPI v3.0")
    for value in schema.get("enum", []):
        expected = JSON_TYPES.get(schema.get("type", ""), object)
        if not isinstance(value, expected) or isinstance(value, bool) != (expected is bool):
            problems.append(f"{where}: enum value {value!r} is not a {schema.get('type')}")
    if "default" in schema:
        default = apply_defaults(schema, copy.deepcopy(schema["default"]))
        error = jsonschema.exceptions.best_match(_validator(schema).iter_errors(default))
        if error is not None:
            problems.append(f"{where}: default {schema['default']!r} is invalid: {error.message}")
    if schema.get("x-kubernetes-list-type") == "map":
        required = set(schema.get("items", {}).get("required", []))
        missing = set(schema.get("x-kubernetes-list-map-keys", [])) - required
        if missing:
            problems.append(f"{where}: list-map keys {sorted(missing)} must be required")
    for rule in schema.get("x-kubernetes-validations", []):
        try:
            _program(rule["rule"])
        except Exception as e:  # celpy raises its own parse error types
            problems.append(f"{where}: CEL rule {rule['rule']!r} does not compile: {e}")
        if not rule.get("message"):
            problems.append(f"{where}: CEL rule {rule['rule']!r} has no message")
    for name, sub in schema.get("properties", {}).items():
        problems += structural_problems(sub, f"{path}.{name}" if path else name)
    if isinstance(schema.get("additionalProperties"), dict):
        problems += structural_problems(schema["additionalProperties"], f"{where}.<key>")
    if "items" in schema:
        problems += structural_problems(schema["items"], f"{where}[]")
    return problems


def apply_defaults(schema: dict[str, Any], obj: Any) -> Any:
    """The API server's defaulting: absent fields with a default get it, recursively."""
    if isinstance(obj, dict) and "properties" in schema:
        for name, sub in schema["properties"].items():
            if name not in obj and "default" in sub:
                obj[name] = copy.deepcopy(sub["default"])
            if name in obj:
                obj[name] = apply_defaults(sub, obj[name])
    if isinstance(obj, list) and "items" in schema:
        return [apply_defaults(schema["items"], item) for item in obj]
    return obj


def _strict(schema: dict[str, Any]) -> dict[str, Any]:
    """Our OpenAPI schema as plain JSON Schema draft 4, with unknown fields rejected."""
    out = {k: v for k, v in schema.items() if not k.startswith("x-kubernetes-")}
    if schema.get("x-kubernetes-int-or-string"):
        out["anyOf"] = [{"type": "integer"}, {"type": "string"}]
    if "properties" in schema:
        out["properties"] = {k: _strict(v) for k, v in schema["properties"].items()}
        if not schema.get("x-kubernetes-preserve-unknown-fields"):
            out["additionalProperties"] = False
    if isinstance(schema.get("additionalProperties"), dict):
        out["additionalProperties"] = _strict(schema["additionalProperties"])
    if "items" in schema:
        out["items"] = _strict(schema["items"])
    out.pop("nullable", None)
    return out


def _validator(schema: dict[str, Any]) -> jsonschema.Draft4Validator:
    return jsonschema.Draft4Validator(_strict(schema))


def _path(parts: Any) -> str:
    out = ""
    for part in parts:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


class CrdValidator:
    def __init__(self, crd: dict[str, Any]) -> None:
        self.schema = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
        self.validator = _validator(self.schema)

    def errors(self, obj: dict[str, Any]) -> list[str]:
        obj = apply_defaults(self.schema, copy.deepcopy(obj))
        found = []
        for error in self.validator.iter_errors(obj):
            path = _path(error.absolute_path)
            if error.validator == "required":
                missing = re.match(r"'(.+)' is a required property", error.message)
                path = f"{path}.{missing.group(1)}" if missing and path else path
            found.append(f"{path or '<root>'}: {error.message}")
        return found + self.cel_errors(self.schema, obj, "")

    def cel_errors(self, schema: dict[str, Any], value: Any, path: str) -> list[str]:
        found = []
        for rule in schema.get("x-kubernetes-validations", []):
            try:
                ok = _program(rule["rule"]).evaluate({"self": celpy.json_to_cel(value)})
            except Exception as e:  # an evaluation error rejects the object too
                found.append(f"{path}: rule {rule['rule']!r} failed to evaluate: {e}")
                continue
            if ok is not True and not (isinstance(ok, celpy.celtypes.BoolType) and bool(ok)):
                found.append(f"{path}: Invalid value: {rule['message']}")
        if isinstance(value, dict):
            for name, sub in schema.get("properties", {}).items():
                if name in value:
                    found += self.cel_errors(sub, value[name], f"{path}.{name}" if path else name)
        if isinstance(value, list) and "items" in schema:
            for i, item in enumerate(value):
                found += self.cel_errors(schema["items"], item, f"{path}[{i}]")
        return found
