"""`make demo` sets up what the demo needs and nothing else: the `demo` extra, not the test
tools; and it never stops a Prometheus service the user already runs (only the one Debian's
package starts when `make prometheus` installs it)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from tests.support.make import make


def test_make_demo_installs_the_demo_extra_only() -> None:
    # -B: as on a fresh clone (every stamp out of date); -n: print the recipes, run nothing.
    done = make("-n", "-B", "demo")
    assert done.returncode == 0, done.stderr
    installs = [line for line in done.stdout.splitlines() if "pip install" in line and "-e" in line]
    assert installs and all("'.[demo]'" in line for line in installs), installs
    assert "test" not in " ".join(installs)


def test_make_prometheus_leaves_an_installed_prometheus_service_alone(tmp_path: Path) -> None:
    """With prometheus and promtool already on PATH, the target neither installs nor stops
    anything: a `systemctl` that records its calls is never called."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    calls = tmp_path / "calls"
    for name, body in (
        ("prometheus", "exit 0"),
        ("promtool", "exit 0"),
        ("systemctl", f'echo "systemctl $*" >> {calls}'),
        ("apt-get", f'echo "apt-get $*" >> {calls}'),
    ):
        script = bin_dir / name
        script.write_text(f"#!/bin/sh\n{body}\n")
        script.chmod(0o755)
    make_dir = Path(shutil.which("make") or "/usr/bin/make").parent
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{make_dir}{os.pathsep}/bin"}
    done = make("prometheus", env=env)
    assert done.returncode == 0, done.stderr
    assert not calls.exists(), calls.read_text()
