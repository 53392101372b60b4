"""`tokenfleet sim` as a user starts it: the flags `plan` has, and one-line startup errors."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.support.sim_args import sim_args
from tokenfleet.errors import UserError
from tokenfleet.sim.setup import plan_for, settings_from_args


def test_pp_quantization_and_kv_dtype_reach_the_plan() -> None:
    p = plan_for(sim_args("--tp", "1", "--pp", "2", "--max-model-len", "4096"))
    assert (p.tensor_parallel_size, p.pipeline_parallel_size) == (1, 2)
    _, _, summary = settings_from_args(sim_args("--tp", "1", "--pp", "2"))
    assert "(TP 1 x PP 2)" in summary
    fp8 = plan_for(sim_args("--quantization", "fp8", "--kv-cache-dtype", "fp8"))
    assert fp8.quantization == "fp8" and fp8.kv_cache_dtype == "fp8"
    assert fp8.kv_cache_tokens > plan_for(sim_args()).kv_cache_tokens


@pytest.mark.parametrize(
    ("extra", "fragment"),
    [
        (["--pp", "0"], "--pp"),
        (["--engine-version", "99.0"], "--engine-version 0.32.0"),
        (["--quantization", "awq"], "does not match the checkpoint"),
    ],
)
def test_refused_like_plan(extra: list[str], fragment: str) -> None:
    with pytest.raises(UserError, match=fragment.replace(".", r"\.")):
        plan_for(sim_args(*extra))


def _sim(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tokenfleet.cli", "sim", "--model", "meta-llama/Llama-3.1-8B",
         "--gpu", "l4", "--max-model-len", "4096", *argv],
        capture_output=True, text=True, check=False, timeout=120,
    )  # fmt: skip


def _one_error_line(run: subprocess.CompletedProcess[str]) -> str:
    assert run.returncode == 2, run.stderr
    assert "Traceback" not in run.stderr
    errors = [line for line in run.stderr.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1 and run.stderr.rstrip().endswith(errors[0])
    return errors[0]


@pytest.mark.slow
def test_busy_port_is_one_line(busy_port: int) -> None:
    line = _one_error_line(_sim("--host", "127.0.0.1", "--port", str(busy_port)))
    assert f"--port={busy_port}" in line and "already in use" in line


@pytest.mark.slow
@pytest.mark.parametrize(
    ("argv", "fragment"),
    [
        (["--port", "99999"], "--port=99999: is not a TCP port; use 1-65535"),
        # TEST-NET-3 (RFC 5737): never an address of this machine
        (["--host", "203.0.113.7", "--port", "0"], "--port=0: is not a TCP port"),
        (["--host", "203.0.113.7", "--port", "18099"], "--host=203.0.113.7: is not an address"),
        (["--host", "no-such-host.invalid", "--port", "18099"], "cannot be resolved"),
    ],
)
def test_bad_listen_address_is_one_line(argv: list[str], fragment: str) -> None:
    assert fragment in _one_error_line(_sim(*argv))
