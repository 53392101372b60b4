"""The installed product runs its own demo: the wheel, installed with the `demo` extra into a
fresh venv outside the checkout, runs a short `tokenfleet demo` from an empty directory to
the end and writes demo.png. Nothing of the source tree is on its path: the emulated
Kubernetes API (tokenfleet.testing) and the example LLMService come from the wheel.

pip resolves the dependencies through the machine's configured index, as a user's would.
The demo is short (a few simulated minutes at 10x), so the test takes a few minutes of wall
time, most of it pip; it asserts on what was written, never on time.
"""

from __future__ import annotations

import os
import subprocess
import sys
import venv
from pathlib import Path

import pytest

pytestmark = pytest.mark.system

ROOT = Path(__file__).resolve().parents[2]
# Failure bounds for a busy 2-core machine, not expectations.
PIP_TIMEOUT_S = 900
DEMO_TIMEOUT_S = 600


def _run(argv: list[str], cwd: Path, timeout: float, env: dict[str, str] | None = None) -> str:
    done = subprocess.run(
        argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout, check=False
    )
    output = done.stdout + done.stderr
    assert done.returncode == 0, f"{' '.join(argv[:4])} ... exited {done.returncode}:\n{output}"
    return output


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("dist")
    _run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(out), str(ROOT)],
        cwd=out,
        timeout=PIP_TIMEOUT_S,
    )
    (found,) = out.glob("tokenfleet-*.whl")
    return found


def test_the_wheel_holds_the_demo_parts_and_no_tests(wheel: Path) -> None:
    import zipfile

    names = set(zipfile.ZipFile(wheel).namelist())
    assert "tokenfleet/testing/kmock_cluster.py" in names
    assert "tokenfleet/localfleet/examples/llama-3.1-8b-l4-autoscale.yaml" in names
    assert not any(n.startswith("tests/") for n in names)


def test_installed_wheel_runs_a_short_demo_from_an_empty_directory(
    wheel: Path, tmp_path: Path
) -> None:
    assert ROOT not in tmp_path.parents  # outside the checkout
    env_dir = tmp_path / "venv"
    venv.create(env_dir, with_pip=True)
    python = env_dir / "bin" / "python"
    # Not the caller's PYTHONPATH: a source tree on it (its egg-info) makes pip take
    # tokenfleet as installed already, and the venv gets no `tokenfleet` command.
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    _run(
        [str(python), "-m", "pip", "install", "-q", f"{wheel}[demo]"],
        cwd=tmp_path,
        timeout=PIP_TIMEOUT_S,
        env=env,
    )
    work = tmp_path / "empty"
    work.mkdir()
    env["PATH"] = f"{env_dir / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    output = _run(
        [
            str(env_dir / "bin" / "tokenfleet"),
            "demo",
            "--scenario",
            "check",
            "--workdir",
            str(tmp_path / "logs"),
        ],
        cwd=work,
        timeout=DEMO_TIMEOUT_S,
        env=env,
    )
    plot = work / "demo.png"
    assert plot.is_file() and plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", output
    assert "simulated" in output and "plot: demo.png" in output, output
    # The summary counts the load and says whether this machine kept the time scale.
    assert "arrivals drawn on the schedule" in output and "time scale: " in output, output
    assert f"logs kept in {tmp_path / 'logs'}" in output
    assert (tmp_path / "logs" / "operator.log").is_file()
    assert (tmp_path / "logs" / "prometheus" / "prometheus.log").is_file()
    # The installed package, not the checkout, ran.
    where = _run(
        [str(python), "-c", "import tokenfleet.testing.kmock_cluster as m; print(m.__file__)"],
        cwd=work,
        timeout=60,
        env=env,
    )
    assert str(ROOT) not in where and str(env_dir) in where
