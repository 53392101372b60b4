"""The controller's rooms stay small (issue 31): controller/autoscaler.py under 400 lines,
and no function in controller/ or autoscale/policy.py over 80 lines, so a change finds a
function of one job to go into (or a new one beside it), not the middle of a long one."""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[3] / "operator" / "src" / "tokenfleet"
MAX_FUNCTION_LINES = 80


def long_functions(path: Path) -> list[str]:
    tree = ast.parse(path.read_text())
    return [
        f"{path.name}:{node.lineno} {node.name} ({node.end_lineno - node.lineno + 1})"
        for node in ast.walk(tree)
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
        and node.end_lineno is not None
        and node.end_lineno - node.lineno + 1 > MAX_FUNCTION_LINES
    ]


def test_no_function_over_80_lines_in_the_controller_and_the_policy() -> None:
    paths = [*sorted((SRC / "controller").glob("*.py")), SRC / "autoscale" / "policy.py"]
    assert [f for path in paths for f in long_functions(path)] == []


def test_the_autoscaler_shell_stays_under_400_lines() -> None:
    assert len((SRC / "controller" / "autoscaler.py").read_text().splitlines()) < 400


def test_the_check_sees_a_long_function(tmp_path: Path) -> None:
    body = "\n".join(f"    x{i} = {i}" for i in range(MAX_FUNCTION_LINES))
    long = tmp_path / "long.py"
    long.write_text(f"def f() -> None:\n{body}\n")
    assert long_functions(long) == [f"long.py:1 f ({MAX_FUNCTION_LINES + 1})"]
