"""The pydantic -> structural schema translator refuses what Kubernetes would refuse."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import Field

from tokenfleet.api.base import FREE_FORM, INT_OR_STRING, SpecModel
from tokenfleet.api.crd import build_crd
from tokenfleet.api.schema import SchemaError, structural_schema


class Inner(SpecModel):
    n: int = Field(default=1, gt=0)


class Good(SpecModel):
    inner: Inner | None = None
    items: list[Inner] = Field(default_factory=list)
    labels: dict[str, str] = Field(default_factory=dict)
    blob: dict[str, Any] | None = Field(default=None, json_schema_extra=FREE_FORM)
    size: int | str = Field(default=0, json_schema_extra=INT_OR_STRING)


def test_translation() -> None:
    schema = structural_schema(Good)
    props = schema["properties"]
    assert props["inner"]["type"] == "object"  # $ref inlined, null branch dropped
    assert props["inner"]["properties"]["n"] == {
        "type": "integer", "default": 1, "exclusiveMinimum": True, "minimum": 0,
    }  # fmt: skip
    assert props["items"]["items"]["type"] == "object"
    assert props["labels"]["additionalProperties"] == {"type": "string"}
    assert props["blob"] == {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
    assert props["size"] == {"default": 0, "x-kubernetes-int-or-string": True}
    assert "additionalProperties" not in schema and "title" not in schema


class Loose(SpecModel):
    anything: Any = None


class FreeWithoutMarker(SpecModel):
    blob: dict[str, Any] = Field(default_factory=dict)


class Union(SpecModel):
    value: int | list[int] = 0


@pytest.mark.parametrize(
    ("model", "needle"),
    [(Loose, "without a type"), (FreeWithoutMarker, "FREE_FORM"), (Union, "union")],
)
def test_untranslatable_fields_fail_loudly(model: type[SpecModel], needle: str) -> None:
    with pytest.raises(SchemaError, match=needle):
        structural_schema(model)


def test_only_free_form_parts_preserve_unknown_fields() -> None:
    found: list[str] = []

    def walk(node: dict[str, Any], path: str) -> None:
        if node.get("x-kubernetes-preserve-unknown-fields"):
            found.append(path)
        for name, sub in node.get("properties", {}).items():
            walk(sub, f"{path}.{name}")
        if "items" in node:
            walk(node["items"], f"{path}[]")

    walk(build_crd()["spec"]["versions"][0]["schema"]["openAPIV3Schema"], "")
    assert sorted(found) == [
        ".spec.engine.env[].valueFrom",
        ".spec.engine.speculative",
        ".spec.engine.speculativeDraftConfig",
        ".spec.gpu.affinity",
        ".spec.model.config",
    ]
