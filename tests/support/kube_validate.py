"""`kubernetes-validate --strict` (the real command, from this venv) over rendered
manifests, at the Kubernetes releases we target: the oldest (1.30) and the newest the
package ships. Shared by the manifest and chart tests of the system tier."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

VERSIONS = ["1.30.0", kubernetes_validate.latest_version()]
VALIDATOR = Path(sys.executable).parent / "kubernetes-validate"


def run_validator(docs: list[dict[str, Any]], version: str, tmp: Path) -> tuple[int, str]:
    """(exit code, output) of kubernetes-validate --strict on `docs` at `version`."""
    path = tmp / f"manifests-{version}.yaml"
    path.write_text(yaml.safe_dump_all(docs, sort_keys=False))
    if not VALIDATOR.exists():
        pytest.fail(f"{VALIDATOR} missing: run `make venv` (kubernetes-validate)", pytrace=False)
    proc = subprocess.run(
        [str(VALIDATOR), "--strict", "--kubernetes-version", version, str(path)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    return proc.returncode, proc.stdout + proc.stderr
