"""`make image`: the tags it builds are the chart's default operator image and the image
spec.engine.simulate renders; its dependencies are pinned; without a container engine it
stops with one clear line. (No Docker engine runs here: the Dockerfiles themselves are
linted by hadolint in tests/system/test_images_lint.py.)"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import yaml
from packaging.requirements import Requirement

from tests.support.make import make
from tokenfleet.api.engine import simulator_image

ROOT = Path(__file__).resolve().parents[3]


def _tags() -> dict[str, str]:
    """Dockerfile directory -> the tag `make image` gives its build."""
    run = make("-n", "image")
    assert run.returncode == 0, run.stderr
    builds = re.findall(r"build -f images/(\S+)/Dockerfile -t (\S+) \.", run.stdout)
    return dict(builds)


def test_make_image_builds_both_images_with_the_versions_tag() -> None:
    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    tags = _tags()
    assert set(tags) == {"operator", "engine-sim"}
    assert all(tag.endswith(f":{version}") for tag in tags.values()), tags


def test_the_charts_default_image_is_what_make_image_tags() -> None:
    chart = yaml.safe_load((ROOT / "charts" / "tokenfleet" / "Chart.yaml").read_text())
    values = yaml.safe_load((ROOT / "charts" / "tokenfleet" / "values.yaml").read_text())
    tag = values["image"]["tag"] or chart["appVersion"]
    assert _tags()["operator"] == f"{values['image']['repository']}:{tag}"


def test_the_simulated_engines_image_is_what_make_image_tags() -> None:
    assert _tags()["engine-sim"] == simulator_image()


def test_without_a_container_engine_make_image_says_so_in_one_line(tmp_path: Path) -> None:
    run = make("image", f"DOCKER={tmp_path / 'no-docker'}")
    assert run.returncode != 0
    first = run.stderr.strip().splitlines()[0]
    assert first.startswith("make image: no container engine answers") and "DOCKER=podman" in first
    assert "build" not in run.stdout  # nothing was attempted


def test_every_runtime_dependency_is_pinned_exactly() -> None:
    lines = [
        line
        for line in (ROOT / "images" / "constraints.txt").read_text().splitlines()
        if line and not line.startswith("#")
    ]
    pins = {Requirement(line).name.lower(): Requirement(line) for line in lines}
    assert all(str(r.specifier).startswith("==") for r in pins.values()), lines
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    for dependency in project["dependencies"]:
        req = Requirement(dependency)
        pin = pins.get(req.name.lower())
        assert pin is not None, f"{req.name} is not in images/constraints.txt"
        version = str(pin.specifier).removeprefix("==")
        assert req.specifier.contains(version), (dependency, version)
