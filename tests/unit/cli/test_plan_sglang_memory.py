"""SGLang plans show SGLang's own memory accounting, and its lines add up."""

import json
import re

import pytest

from tokenfleet.capacity import get_gpu
from tokenfleet.cli import main


def _row(table: str, label: str) -> float:
    match = re.search(rf"^\s+{re.escape(label)}.*?\s(\d+\.\d\d)(\s|$)", table, re.M)
    assert match, (label, table)
    return float(match.group(1))


@pytest.mark.parametrize(
    "argv",
    [
        ["--model", "Qwen/Qwen3-32B", "--gpu", "h100-sxm"],
        ["--model", "Qwen/Qwen3-32B", "--gpu", "l4", "--tp", "4"],
        ["--model", "meta-llama/Llama-3.1-8B", "--gpu", "a10g", "--mem-fraction-static", "0.8"],
    ],
)
def test_sglang_memory_adds_up(capsys, argv):
    assert main(["plan", *argv, "--engine", "sglang"]) == 0
    table = capsys.readouterr().out
    context = _row(table, "CUDA context + NCCL at start")
    static = _row(table, "static pool (mem-fraction-static")
    weights, kv = _row(table, "weights"), _row(table, "KV cache pool")
    rest = _row(table, "the rest: activations, CUDA graphs")
    total = _row(table, "total")
    gpu = get_gpu(argv[argv.index("--gpu") + 1]).memory_gib
    assert weights + kv == pytest.approx(static, abs=0.02)
    assert context + static + rest == pytest.approx(total, abs=0.02)
    assert total == pytest.approx(gpu, abs=0.01)  # SGLang plans the whole GPU, never more
    assert "CUDA graphs 0.00" not in table and "budget" not in table

    assert main(["plan", *argv, "--engine", "sglang", "-o", "json"]) == 0
    memory = json.loads(capsys.readouterr().out)["memory"]
    assert memory["staticPool"] == pytest.approx(memory["weights"] + memory["kvCache"], abs=0.02)
    assert memory["freeAtStart"] == pytest.approx(
        memory["staticPool"] + memory["activation"], abs=0.02
    )


def test_vllm_table_keeps_its_budget_view(capsys):
    assert main(["plan", "--model", "meta-llama/Llama-3.1-8B", "--gpu", "h100-sxm"]) == 0
    table = capsys.readouterr().out
    assert "budget" in table and "(SGLang)" not in table
