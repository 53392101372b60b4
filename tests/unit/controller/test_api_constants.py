"""One source of truth for the API (issue 31): the controller imports the CRD's group,
version and kind from tokenfleet.api; no module under controller/ assigns them again."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tokenfleet.api.spec import API_VERSION, GROUP, KIND, VERSION

SRC = Path(__file__).resolve().parents[3] / "operator" / "src" / "tokenfleet"
CONSTANTS = {API_VERSION, GROUP, KIND, VERSION}


def redefined(path: Path) -> list[str]:
    """Module-level assignments of the API's group, version or kind as string literals."""
    found = []
    for node in ast.parse(path.read_text()).body:
        if not isinstance(node, ast.Assign | ast.AnnAssign):
            continue
        for value in ast.walk(node):
            if isinstance(value, ast.Constant) and value.value in CONSTANTS:
                found.append(f"{path.name}:{node.lineno} {value.value!r}")
    return found


@pytest.mark.parametrize(
    "path", sorted((SRC / "controller").glob("*.py")), ids=lambda p: str(p.name)
)
def test_the_controller_imports_the_api_constants(path: Path) -> None:
    assert redefined(path) == []


def test_the_check_sees_a_redefinition(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text('API_VERSION, KIND = "tokenfleet.dev/v1alpha1", "LLMService"\n')
    assert redefined(module) == [
        "m.py:1 'tokenfleet.dev/v1alpha1'",
        "m.py:1 'LLMService'",
    ]
