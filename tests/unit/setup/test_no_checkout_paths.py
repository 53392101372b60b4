"""The package stands alone: no module under operator/src names a path of the checkout
(tests/, or the repository root reached through Path(__file__).parents), so an installed
wheel behaves as the source tree does."""

from __future__ import annotations

import re
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[3] / "operator" / "src" / "tokenfleet"
CHECKOUT_PATH = re.compile(r"tests/|parents\[")


def test_no_module_names_a_checkout_path() -> None:
    hits = [
        f"{path.relative_to(PACKAGE)}:{number}: {line.strip()}"
        for path in sorted(PACKAGE.rglob("*"))
        if path.is_file() and path.suffix in (".py", ".yaml", ".json", ".csv")
        for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1)
        if CHECKOUT_PATH.search(line)
    ]
    assert not hits, "\n".join(hits)
