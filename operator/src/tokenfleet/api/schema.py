"""pydantic JSON Schema -> Kubernetes structural OpenAPI v3 schema.

Kubernetes accepts only "structural" schemas in a CRD: every node has a type, no $ref,
no anyOf/oneOf that could change the type, no additionalProperties next to properties,
boolean exclusiveMinimum/Maximum. pydantic emits JSON Schema 2020-12; this rewrites it
and fails loudly on anything it does not know how to translate, so a new model field can
never produce a CRD the API server would refuse.
"""

from __future__ import annotations

import copy
from typing import Any

from pydantic import BaseModel

_DROP = {"title", "additionalProperties"}
_KEEP = {
    "type",
    "description",
    "properties",
    "required",
    "items",
    "enum",
    "default",
    "format",
    "pattern",
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "minLength",
    "maxLength",
    "minItems",
    "maxItems",
    "minProperties",
    "maxProperties",
    "nullable",
    "x-kubernetes-validations",
    "x-kubernetes-preserve-unknown-fields",
    "x-kubernetes-int-or-string",
    "x-kubernetes-list-type",
    "x-kubernetes-list-map-keys",
    "x-kubernetes-map-type",
}


class SchemaError(ValueError):
    pass


def structural_schema(model: type[BaseModel]) -> dict[str, Any]:
    """The structural OpenAPI v3 schema of a model, as the CRD's openAPIV3Schema wants it."""
    raw = model.model_json_schema(by_alias=True, mode="validation")
    defs = raw.pop("$defs", {})
    return _convert(raw, defs, model.__name__)


def _convert(node: dict[str, Any], defs: dict[str, Any], where: str) -> dict[str, Any]:
    node = dict(node)
    if "anyOf" in node:
        node = _collapse_any_of(node, where)
    if "$ref" in node:  # inline the definition; sibling keys (description) win
        target = defs[node.pop("$ref").rsplit("/", 1)[-1]]
        node = {**copy.deepcopy(target), **node}
    if "const" in node:
        node["enum"] = [node.pop("const")]
    if node.get("default", 0) is None:  # unset optional field: no default, no null
        del node["default"]
    if node.get("x-kubernetes-int-or-string"):
        return _ordered(_leaf(node, {"type"}))
    if node.get("additionalProperties") is True or (
        node.get("type") == "object"
        and not node.get("properties")
        and "additionalProperties" not in node
    ):
        # A free-form object (dict[str, Any]): Kubernetes keeps it only when told to.
        if not node.get("x-kubernetes-preserve-unknown-fields"):
            raise SchemaError(f"{where}: free-form object without FREE_FORM marker")
        node.pop("additionalProperties", None)
        node["type"] = "object"
        return _ordered(_leaf(node))
    for bound in ("exclusiveMinimum", "exclusiveMaximum"):  # 2020-12 number -> OpenAPI bool
        if isinstance(node.get(bound), int | float) and not isinstance(node[bound], bool):
            node[bound.replace("exclusiveM", "m")] = node[bound]
            node[bound] = True
    if "type" not in node:
        raise SchemaError(f"{where}: schema node without a type: {node}")
    out = _leaf(node)
    if "properties" in node:
        out["properties"] = {
            name: _convert(sub, defs, f"{where}.{name}") for name, sub in node["properties"].items()
        }
    if isinstance(node.get("additionalProperties"), dict):  # dict[str, str]
        out["additionalProperties"] = _convert(node["additionalProperties"], defs, f"{where}.<key>")
    if "items" in node:
        out["items"] = _convert(node["items"], defs, f"{where}[]")
    return _ordered(out)


# Key order of the generated YAML, for a reader: what it is, what it allows, what is inside.
_ORDER = ("type", "description", "default", "enum", "format", "pattern", "nullable")
_LAST = ("required", "x-kubernetes-validations", "properties", "additionalProperties", "items")


def _ordered(node: dict[str, Any]) -> dict[str, Any]:
    head = [k for k in _ORDER if k in node]
    tail = [k for k in _LAST if k in node]
    middle = sorted(k for k in node if k not in head and k not in tail)
    return {k: node[k] for k in (*head, *middle, *tail)}


def _leaf(node: dict[str, Any], drop: set[str] = frozenset()) -> dict[str, Any]:  # type: ignore[assignment]
    unknown = set(node) - _KEEP - _DROP - {"properties", "items", "anyOf", "$ref"}
    if unknown:
        raise SchemaError(f"no structural translation for {sorted(unknown)} in {node}")
    out = {k: v for k, v in node.items() if k in _KEEP and k not in drop and k != "properties"}
    out.pop("items", None)
    if "description" in out:
        out["description"] = " ".join(str(out["description"]).split())
    return out


def _collapse_any_of(node: dict[str, Any], where: str) -> dict[str, Any]:
    options = [o for o in node.pop("anyOf") if o.get("type") != "null"]
    if node.get("x-kubernetes-int-or-string"):
        return node
    if len(options) != 1:
        raise SchemaError(f"{where}: a union of {len(options)} types is not structural")
    return {**options[0], **node}
