"""Rendered manifests of every case under cases/ equal the reviewed files under golden/.

The golden files are what a reviewer reads to see what the operator creates. After an
intended change (render, engines or the capacity model), regenerate and review the diff:
    TOKENFLEET_UPDATE_GOLDEN=1 .venv/bin/pytest tests/unit/render/test_golden.py
"""

from __future__ import annotations

import os

import pytest
import yaml

from tests.support.render_cases import CASES, GOLDEN_DIR, render_case

UPDATE = os.environ.get("TOKENFLEET_UPDATE_GOLDEN") == "1"


def golden_text(name: str) -> str:
    r = render_case(name)
    header = (
        f"# Golden output of tests/unit/render/cases/{name}.yaml (tokenfleet render).\n"
        f"# Plan: {r.plan.reason}\n"
        "# Regenerate: TOKENFLEET_UPDATE_GOLDEN=1 .venv/bin/pytest tests/unit/render\n"
    )
    return header + yaml.safe_dump_all(r.manifests, sort_keys=False, width=100)


@pytest.mark.parametrize("name", CASES)
def test_render_matches_golden(name: str) -> None:
    path = GOLDEN_DIR / f"{name}.yaml"
    text = golden_text(name)
    if UPDATE:
        path.write_text(text)
    assert path.exists(), f"no golden file {path}: run with TOKENFLEET_UPDATE_GOLDEN=1"
    assert text == path.read_text(), (
        f"rendered {name} differs from {path}; if intended, regenerate with "
        "TOKENFLEET_UPDATE_GOLDEN=1 and review the diff"
    )


def test_every_golden_file_has_a_case() -> None:
    stale = sorted({p.stem for p in GOLDEN_DIR.glob("*.yaml")} - set(CASES))
    assert not stale, f"golden files without a case: {stale}"
