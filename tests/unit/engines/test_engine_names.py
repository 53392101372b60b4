"""Engine facts live in the engine records (tokenfleet/engines, and the capacity model's
EngineFacts below them): no module elsewhere decides by comparing an engine's name.

An AST walk over the package, so that a comparison spread over lines, in a lambda or with
single quotes is found as surely as `engine == "sglang"`; the table pins the walk itself.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import tokenfleet
from tokenfleet.engines import REGISTRY

PACKAGE = Path(tokenfleet.__file__).parent
# The engine records themselves: engines/ and the capacity model's profiles they point at.
ALLOWED = ("engines/", "capacity/engine_profiles.py")
NAMES = frozenset(REGISTRY)


def _names_in(node: ast.expr) -> set[str]:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return {node.value} & NAMES
    if isinstance(node, ast.Tuple | ast.List | ast.Set):
        return set().union(*(_names_in(e) for e in node.elts))
    return set()


def name_comparisons(source: str) -> list[tuple[int, str]]:
    """(line, engine name) of each ==, !=, in or not in that tests a value against an
    engine's name written out."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Compare):
            continue
        lefts = [node.left, *node.comparators[:-1]]
        for op, left, right in zip(node.ops, lefts, node.comparators, strict=True):
            if isinstance(op, ast.Eq | ast.NotEq | ast.In | ast.NotIn):
                found += [(node.lineno, n) for n in sorted(_names_in(left) | _names_in(right))]
    return found


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ('x = engine == "sglang"', [(1, "sglang")]),
        ("x = 'vllm' != kind", [(1, "vllm")]),
        ('x = kind in ("vllm", "sglang")', [(1, "sglang"), (1, "vllm")]),
        ('f = lambda e: e != "vllm"', [(1, "vllm")]),
        ('x = (\n    a\n    == "sglang"\n)', [(2, "sglang")]),
        ('x = kind == "nixl"', []),
        ('x = {"vllm": 1}["vllm"]', []),
        ("x = engine(kind).facts.profile_run", []),
    ],
)
def test_the_walk_finds_name_comparisons(source: str, expected: list[tuple[int, str]]) -> None:
    assert name_comparisons(source) == expected


@pytest.mark.slow  # over a second: the unit-slow tier
def test_no_module_outside_the_engine_records_compares_engine_names() -> None:
    found = [
        f"{path.relative_to(PACKAGE)}:{line}: compares with {name!r}"
        for path in sorted(PACKAGE.rglob("*.py"))
        if not str(path.relative_to(PACKAGE).as_posix()).startswith(ALLOWED)
        for line, name in name_comparisons(path.read_text())
    ]
    assert not found, "read the engine record's fact instead:\n" + "\n".join(found)
