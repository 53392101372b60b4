"""`pytest tests` collects every tier in one run, and the test folders are not packages:
two test modules with one basename make collection fail ("import file mismatch") although
each tier passes alone. Each test module's name must be unique across tests/."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

TESTS = Path(__file__).resolve().parents[2]


def test_test_module_names_are_unique_across_tiers() -> None:
    names = Counter(p.name for p in TESTS.rglob("*.py") if p.name != "conftest.py")
    clashes = sorted(name for name, count in names.items() if count > 1)
    assert not clashes, f"test modules sharing a name across tests/: {clashes}"
