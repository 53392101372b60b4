"""The spec's field table of docs/api.md, generated from the CRD's schema (which is itself
generated from these models), so the reference never drifts from the API. Pure.

`tokenfleet crd` writes it between the two markers of docs/api.md (the prose around them
is written by hand) and `tokenfleet crd --check` fails when it is stale.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from tokenfleet.api.crd import open_api_schema

BEGIN = "<!-- BEGIN GENERATED: tokenfleet crd -->"
END = "<!-- END GENERATED -->"
# Enums too long for a table cell, and where their values are listed instead.
LONG_ENUMS = {"gpu.type": "catalog GPU (`tokenfleet gpus`) or `auto`"}


def _type(path: str, node: dict[str, Any]) -> str:
    if path in LONG_ENUMS:
        return LONG_ENUMS[path]
    if "enum" in node:
        return ", ".join(str(v) for v in node["enum"])
    if node.get("x-kubernetes-int-or-string"):
        return "int or string"
    return str(node.get("type", "object"))


def _default(node: dict[str, Any]) -> str:
    if "default" not in node or node["default"] in ({}, []):
        return ""
    value = node["default"]
    return f"`{value if isinstance(value, str) else json.dumps(value)}`"


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def rows(node: dict[str, Any], prefix: str = "") -> Iterator[tuple[str, str, str, str]]:
    """(path, type, default, meaning) for every leaf field under `node`, in schema order."""
    for name, child in (node.get("properties") or {}).items():
        path = f"{prefix}{name}"
        if child.get("type") == "object" and child.get("properties"):
            yield from rows(child, f"{path}.")
        else:
            yield path, _type(path, child), _default(child), _cell(child.get("description", ""))


def spec_table() -> str:
    spec = open_api_schema()["properties"]["spec"]
    lines = ["| field | type | default | meaning |", "|---|---|---|---|"]
    lines += [f"| `{p}` | {t} | {d} | {m} |" for p, t, d, m in rows(spec)]
    return "\n".join(lines) + "\n"


def fill(document: str) -> str:
    """`document` with the text between the markers replaced by the generated table."""
    if BEGIN not in document or END not in document:
        raise ValueError(f"no {BEGIN} ... {END} markers")
    head, rest = document.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    return f"{head}{BEGIN}\n{spec_table()}{END}{tail}"
