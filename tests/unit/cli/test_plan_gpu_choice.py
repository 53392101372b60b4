"""`tokenfleet plan --gpu a,b,c`: the comparison table and JSON, and one-line errors."""

from __future__ import annotations

import json

import pytest

from tokenfleet.cli import main

MODEL = ("--model", "meta-llama/Llama-3.1-8B", "--max-model-len", "8192")


def test_the_table_ranks_every_type_and_marks_the_choice(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["plan", *MODEL, "--gpu", "l4,l40s,h100-sxm"]) == 0
    out = capsys.readouterr().out
    table = out[out.index("GPU types") :]
    rows = [line.split()[0] for line in table.splitlines()[2:] if line.startswith("    ")]
    assert sorted(rows) == ["h100-sxm", "l4", "l40s"]
    chosen = next(line for line in table.splitlines() if "<- chosen" in line).split()[0]
    assert out.splitlines()[0].endswith(f"({chosen}), vllm 0.32.0 [profile vllm-0.21+]")
    assert "<- runner-up" in table


def test_json_carries_the_comparison(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", *MODEL, "--gpu", "l40s,h100-sxm=2.0", "-o", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    choice = doc["gpuChoice"]
    assert doc["gpu"] == choice["chosen"]
    prices = {c["gpu"]: c["pricePerHour"] for c in choice["candidates"]}
    assert prices == {"l40s": 1.86, "h100-sxm": 2.0}
    costs = [c["costPerMillionGoodRequests"] for c in choice["candidates"]]
    assert costs == sorted(costs)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--gpu", "l4,,h100-sxm"], "error: gpu=l4,,h100-sxm: has an empty entry"),
        (["--gpu", "l4,l4"], "error: gpu=l4,l4: names l4 twice"),
        (["--gpu", "l4=cheap,l40s"], "error: gpu=l4=cheap: the price is not a number >= 0"),
        (["--gpu", "l4,l40s", "--price-per-gpu-hour", "1"],
         "error: price-per-gpu-hour=1.0: is one price, and --gpu names several types; give "
         "each type its price in --gpu, e.g. --gpu l4=1,l40s"),
        (["--gpu", "l4,h100-sxm-mig-9g.90gb"], "error: gpu=h100-sxm-mig-9g.90gb: unknown GPU type"),
    ],
)  # fmt: skip
def test_bad_gpu_lists_are_one_line(
    capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    assert main(["plan", *MODEL, *argv]) == 2
    err = capsys.readouterr().err
    assert err.startswith(message) and err.count("\n") == 1
