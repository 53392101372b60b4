"""`tokenfleet plan` refuses what an LLMService may not say, with the CRD's own bounds."""

import subprocess
import sys

import pytest

from tokenfleet.api.gpu import GpuSpec
from tokenfleet.api.planrequest import CLI_FLAG_FIELDS, check_cli_bounds
from tokenfleet.api.workload import WorkloadSpec
from tokenfleet.errors import UserError

BASE = ["--model", "meta-llama/Llama-3.1-8B", "--gpu", "l4"]


def _bound(model, name, kind):
    return next(getattr(m, kind) for m in model.model_fields[name].metadata if hasattr(m, kind))


@pytest.mark.slow
@pytest.mark.parametrize(
    ("argv", "fragment"),
    [
        (["--price-per-gpu-hour", "-1"], "price-per-gpu-hour=-1.0: must be >= 0"),
        (["--max-nodes", "0"], "max-nodes=0: must be >= 1"),
        (["--concurrency", str(_bound(WorkloadSpec, "concurrency", "le") + 1)],
         "the CRD's bound on spec.workload.concurrency"),
        (["--tp", "0"], "tp=0: must be >= 1"),
        (["--gpu-memory-utilization", "0.05"], "spec.engine.memoryFraction"),
        (["--input-tokens", "10000000"], "131,072-token context"),
        (["--engine-version", "99.0"], "--engine-version 0.32.0"),
        (["--quantization", "awq"], "does not match the checkpoint"),
    ],
)  # fmt: skip
def test_refused_in_one_line(argv, fragment):
    run = subprocess.run(
        [sys.executable, "-m", "tokenfleet.cli", "plan", *BASE, *argv],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert run.returncode == 2, run.stdout
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and fragment in lines[0], lines


def test_bounds_come_from_the_api_models():
    """Move a bound in the CRD's model and the CLI follows: the table names fields, not
    numbers."""
    top = _bound(GpuSpec, "tensor_parallel_size", "le")
    check_cli_bounds({"tp": top})
    with pytest.raises(UserError, match=f"must be <= {top}"):
        check_cli_bounds({"tp": top + 1})
    for model, name in CLI_FLAG_FIELDS.values():
        assert model.model_fields[name].metadata, (model.__name__, name)  # has bounds
