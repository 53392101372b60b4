"""Setup stays quiet: no setuptools licence deprecation, no pip resolver noise on screen."""

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]


def test_license_is_an_spdx_string_with_a_setuptools_that_reads_it():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    # The TOML-table form ({text = ...}) prints a SetuptoolsDeprecationWarning on every build.
    assert project["project"]["license"] == "Apache-2.0"
    requires = project["build-system"]["requires"]
    setuptools = next(r for r in requires if r.startswith("setuptools"))
    minimum = re.match(r"setuptools>=(\d+)", setuptools)
    assert minimum and int(minimum.group(1)) >= 77  # first setuptools with SPDX strings


def test_engines_pip_output_goes_to_the_log():
    """Every pip call of the engines venv writes to the log, so the expected resolver
    'conflicts' (sglang --no-deps, removed vision wheels) never reach the terminal."""
    text = (ROOT / "Makefile").read_text()
    recipe = text.split("$(STAMPS)/engines:", 1)[1].split("\nengines:", 1)[0]
    pip_lines = [line for line in recipe.splitlines() if "pip" in line and "bin/pip" in line]
    calls = [line for line in recipe.splitlines() if "engines_pip," in line]
    assert len(calls) >= 4
    assert all(">>$(ENGINES_LOG) 2>&1" in line for line in pip_lines)
    helper = re.search(r"^engines_pip = (.*)$", text, re.M)
    assert helper and ">>$(ENGINES_LOG) 2>&1" in helper.group(1) and "tail" in helper.group(1)
