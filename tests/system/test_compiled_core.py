"""The compiled scheduler core (setup.py with TOKENFLEET_COMPILE=1, what the operator image
ships) behaves as the pure Python one.

The wheel is built here the way the image's build stage builds it (offline, no build
isolation, mypyc from the test venv), installed into a folder of its own, and put first on
PYTHONPATH of a child process: there the scheduler, capacity and simulator unit tests run
against it, and plan() over the 220 catalog cases of tests/support/plan_cases.py must give the
pure build's plans to the bit.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
COMPILED = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["tokenfleet"][
    "compiled-modules"
]
# These two count a fast path's use by monkeypatching a LazyScheduler method. Compiled code
# calls the method natively, past the patch, so their spies see nothing; the runs they compare
# are the same kind test_lazy.py compares, which does run here.
SPIES = [
    "tests/unit/scheduling/test_prefill_forward.py::test_chunk_runs_give_the_eager_runs_statistics",
    "tests/unit/scheduling/test_single_step_forward.py::test_single_steps_give_the_eager_runs_statistics",
]


def _run(args: list[str], env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        args, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600, check=False
    )


def _env(site: Path | None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    if site is not None:
        env["PYTHONPATH"] = str(site)
    return env


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    work = tmp_path_factory.mktemp("compiled")
    src = work / "src"
    src.mkdir()
    for name in ("pyproject.toml", "setup.py", "README.md"):
        shutil.copy(ROOT / name, src / name)
    shutil.copytree(
        ROOT / "operator" / "src",
        src / "operator" / "src",
        ignore=shutil.ignore_patterns("__pycache__", "*.egg-info", "*.so"),
    )
    env = {**_env(None), "TOKENFLEET_COMPILE": "1", "PIP_NO_INDEX": "1"}
    pip = [sys.executable, "-m", "pip"]
    build = _run([*pip, "wheel", "-q", "--no-deps", "--no-build-isolation",
                  "-w", str(work / "wheels"), str(src)], env)  # fmt: skip
    assert build.returncode == 0, build.stdout[-3000:] + build.stderr[-3000:]
    (wheel,) = (work / "wheels").glob("tokenfleet-*.whl")
    target = work / "site"
    install = _run([*pip, "install", "-q", "--no-deps", "--no-index", "--target", str(target),
                    str(wheel)], env)  # fmt: skip
    assert install.returncode == 0, install.stderr[-3000:]
    return target


def test_every_listed_module_is_compiled_and_imported_first(site: Path) -> None:
    for module in COMPILED:
        path = Path(module).relative_to("operator/src")
        built = list((site / path.parent).glob(f"{path.stem}.cpython-*.so"))
        assert built, f"{module} was not compiled"
        name = ".".join(path.with_suffix("").parts)
        where = _run([sys.executable, "-c", f"import {name}; print({name}.__file__)"], _env(site))
        assert where.returncode == 0, where.stderr
        assert where.stdout.strip().endswith(".so"), (name, where.stdout)


def test_the_cli_says_which_build_it_runs(site: Path) -> None:
    line = "from tokenfleet.cli import main; main(['--version'])"
    compiled = _run([sys.executable, "-c", line], _env(site))
    pure = _run([sys.executable, "-c", line], _env(None))
    assert compiled.stdout.strip().endswith("(scheduler core: compiled)"), compiled.stdout
    assert pure.stdout.strip().endswith("(scheduler core: pure Python)"), pure.stdout


def test_the_scheduler_capacity_and_simulator_tests_pass_compiled(site: Path) -> None:
    deselect = [arg for spy in SPIES for arg in ("--deselect", spy)]
    run = _run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *deselect,
         "tests/unit/scheduling", "tests/unit/capacity", "tests/unit/sim"],
        _env(site),
    )  # fmt: skip
    assert run.returncode == 0, run.stdout[-5000:]
    assert " passed" in run.stdout and "failed" not in run.stdout


def _plans(site: Path | None) -> list[dict[str, object]]:
    run = _run([sys.executable, "tests/support/plan_cases.py", "run"], _env(site))
    assert run.returncode == 0, run.stderr[-3000:]
    rows = [json.loads(line) for line in run.stdout.splitlines()]
    for row in rows:
        del row["ms"]  # CPU time: the one field that should differ
    return rows


def test_plans_are_the_pure_builds_to_the_bit(site: Path) -> None:
    pure, compiled = _plans(None), _plans(site)
    assert len(pure) == 220
    assert sum("error" not in row for row in pure) > 200  # the table plans, not only refuses
    for a, b in zip(pure, compiled, strict=True):
        assert a == b, a["case"]
