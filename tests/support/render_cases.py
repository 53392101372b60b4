"""Render inputs shared by the unit tests and tests/system/test_manifests_validate.py:
every LLMService under cases/, planned and rendered like `tokenfleet render` does."""

from __future__ import annotations

from pathlib import Path

from tokenfleet.commands.render import Rendered, load_documents, render_documents

CASES_DIR = Path(__file__).parents[1] / "unit" / "render" / "cases"
GOLDEN_DIR = Path(__file__).parents[1] / "unit" / "render" / "golden"
CASES = sorted(p.stem for p in CASES_DIR.glob("*.yaml"))


def render_case(name: str, **kw: bool) -> Rendered:
    path = CASES_DIR / f"{name}.yaml"
    (rendered,) = render_documents(load_documents(str(path)), f"cases/{name}.yaml", **kw)
    return rendered
