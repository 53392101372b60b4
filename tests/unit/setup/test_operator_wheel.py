"""The operator image's wheel (TOKENFLEET_OPERATOR_ONLY=1) leaves the tooling packages out:
the operator must never import them, and a tooling command in that install says what is
missing in one line instead of failing to start."""

from __future__ import annotations

import importlib
import pkgutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

import tokenfleet
from tokenfleet.cli import TOOLING_PACKAGES, main

ROOT = Path(__file__).resolve().parents[3]


def test_the_cli_and_pyproject_name_the_same_tooling() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["tokenfleet"]
    assert tuple(sorted(config["tooling-packages"])) == tuple(sorted(TOOLING_PACKAGES))
    for package in TOOLING_PACKAGES:
        importlib.import_module(package)  # each names a package that exists


@pytest.mark.slow
def test_the_operator_imports_no_tooling() -> None:
    """Every module of the operator's rooms, imported in a fresh interpreter, and no
    tooling module among what they pulled in."""
    rooms = ("api", "autoscale", "capacity", "controller", "engines", "render", "scheduling")
    modules = ["tokenfleet.cli", "tokenfleet.commands.operator"]
    for info in pkgutil.walk_packages(tokenfleet.__path__, "tokenfleet."):
        room = info.name.split(".")[1]
        if room in rooms and not info.name.startswith(TOOLING_PACKAGES):
            modules.append(info.name)
    script = (
        "import importlib, sys\n"
        f"for m in {modules!r}: importlib.import_module(m)\n"
        f"print(sorted(m for m in sys.modules if m.startswith({TOOLING_PACKAGES!r})))\n"
    )
    run = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True, timeout=120
    )
    assert run.stdout.strip() == "[]", run.stdout


def test_a_tooling_command_without_its_package_is_one_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """As in the operator image: every tooling package absent, each tooling command's
    module imported afresh."""
    for name in list(sys.modules):
        if name.startswith(TOOLING_PACKAGES) or name.startswith("tokenfleet.commands."):
            monkeypatch.delitem(sys.modules, name)
    for package in TOOLING_PACKAGES:
        monkeypatch.setitem(sys.modules, package, None)  # as if not installed
    assert main(["calibrate", "--perf"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "tokenfleet.calibration" in err[0] and "not in this install" in err[0]
    assert "tokenfleet[tools]" in err[0]
    with pytest.raises(SystemExit) as shown:
        main(["operator", "--help"])  # the operator's own command still parses
    assert shown.value.code == 0
