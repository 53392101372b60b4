"""What a newcomer hits in the first hour answers in one line (exit 2, naming the flag, the
value and the fix), never a traceback: unreadable files, a closed pipe, a plot directory
that does not exist, a context beyond the model's, an absurd target rate."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tokenfleet.cli import main

BINARY = bytes(range(256)) * 16
PLAN = ["plan", "--model", "meta-llama/Llama-3.1-8B", "--gpu", "l4"]


def _one_line(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    assert "Traceback" not in err
    return lines[0]


@pytest.fixture
def binary(tmp_path: Path) -> Path:
    path = tmp_path / "blob.bin"
    path.write_bytes(BINARY)
    return path


@pytest.mark.parametrize(
    ("argv", "flag", "fix"),
    [
        (["render", "-f", "{}"], "--filename={}", "pass a YAML manifest"),
        ([*PLAN[:2], "{}", *PLAN[3:]], "model={}", "pass a model's config.json"),
        (["autoscale-sim", "--trace", "{}"], "--trace={}", "give a trace file"),
    ],
)
def test_a_binary_file_is_one_line(
    argv: list[str], flag: str, fix: str, binary: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = [a.replace("{}", str(binary)) for a in argv]
    if args[0] == "plan":
        args[2] = str(binary.with_suffix(".json"))
        binary.rename(args[2])
        flag = flag.replace("{}", args[2])
    assert main(args) == 2
    line = _one_line(capsys)
    assert flag.replace("{}", str(binary)) in line and "UTF-8" in line and fix in line, line


def test_a_missing_plot_directory_is_refused_before_the_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    target = tmp_path / "missing" / "x.png"
    # A trace that would fail to load proves the check runs first, before any work.
    assert (
        main(["autoscale-sim", "--trace", str(tmp_path / "none.csv"), "--plot", str(target)]) == 2
    )
    line = _one_line(capsys)
    assert f"--plot={target}: directory {target.parent} does not exist" in line, line


def test_a_plot_that_is_not_a_png_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["autoscale-sim", "--trace", "steady", "--plot", str(tmp_path / "x.pdf")]
    assert main(argv) == 2
    assert "give a path ending in .png" in _one_line(capsys)


@pytest.mark.slow
@pytest.mark.parametrize(
    "argv",
    [
        PLAN,
        ["models"],
        ["calibrate"],
        ["gpus"],
        [*PLAN, "-o", "json"],
    ],
    ids=["plan", "models", "calibrate", "gpus", "plan-json"],
)
def test_a_closed_pipe_is_not_a_traceback(argv: list[str]) -> None:
    """`tokenfleet models | head -1`: the reader is gone. The pipe's read end is closed
    before the command starts, so every write meets EPIPE, deterministically."""
    read, write = os.pipe()
    os.close(read)
    try:
        run = subprocess.run(
            [sys.executable, "-m", "tokenfleet.cli", *argv],
            stdout=write,
            stderr=subprocess.PIPE,
            text=True,
            check=False,
            timeout=120,
        )
    finally:
        os.close(write)
    assert run.returncode == 0, run.stderr
    assert run.stderr == "", run.stderr


def test_a_context_beyond_the_models_is_refused_at_plan(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main([*PLAN, "--max-model-len", "200000"]) == 2
    line = _one_line(capsys)
    assert "max-model-len=200000" in line and "131,072-token context" in line
    assert "lower --max-model-len to 131,072" in line


def test_a_target_rate_beyond_the_crd_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([*PLAN, "--target-rps", "1e9"]) == 2
    assert "the CRD's bound on spec.workload.targetRequestsPerSecond" in _one_line(capsys)


def test_a_target_rate_no_llmservice_can_serve_is_refused(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Within the CRD's bound but more replicas than spec.autoscaling.maxReplicas allows."""
    assert main([*PLAN, "--target-rps", "1e6"]) == 2
    line = _one_line(capsys)
    assert "target-rps=1e+06: needs" in line and "more than the 1,000" in line
    assert "split the traffic" in line


def test_a_reachable_target_rate_still_plans(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([*PLAN, "--target-rps", "5"]) == 0
    assert "cheapest fleet for 5 req/s" in capsys.readouterr().out
