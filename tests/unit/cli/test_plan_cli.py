"""`tokenfleet plan` as a user runs it: the JSON contract and one-line errors."""

import json
import subprocess
import sys

import pytest

from tokenfleet.cli import main

REQUIRED_KEYS = {
    "tensorParallelSize", "pipelineParallelSize", "gpusPerReplica", "nodesPerReplica",
    "gpuMemoryUtilization", "maxNumSeqs", "maxModelLen", "kvCacheTokens", "maxConcurrency",
    "memory", "predicted", "engineArgs", "warnings",
}  # fmt: skip


def _json(capsys, *argv):
    assert main(["plan", *argv, "-o", "json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_json_contract(capsys):
    doc = _json(capsys, "--model", "meta-llama/Llama-3.1-8B", "--gpu", "l4", "--max-model-len",
                "8192", "--concurrency", "4")  # fmt: skip
    assert doc.keys() >= REQUIRED_KEYS
    assert {"weights", "activation", "overhead", "kvCache", "total"} <= doc["memory"].keys()
    assert {"ttftMs", "tpotMs", "outputTokensPerSecond", "goodputRequestsPerSecond"} <= doc[
        "predicted"
    ].keys()
    assert doc["tensorParallelSize"] == 2  # the cheapest per good request at the default SLO
    args = doc["engineArgs"]
    assert "--tensor-parallel-size" in args and "--gpu-memory-utilization" in args
    assert all(isinstance(a, str) for a in args)


def test_fixed_tp_is_planned_at_that_tp(capsys):
    doc = _json(capsys, "--model", "meta-llama/Llama-3.1-8B", "--gpu", "h100-sxm", "--tp", "4")
    assert doc["tensorParallelSize"] == 4


def test_sglang_flags(capsys):
    doc = _json(capsys, "--model", "Qwen/Qwen3-32B", "--gpu", "h100-sxm", "--engine", "sglang",
                "--mem-fraction-static", "0.8")  # fmt: skip
    assert doc["gpuMemoryUtilization"] == 0.8
    assert "--mem-fraction-static" in doc["engineArgs"]


def test_yaml_and_table_outputs(capsys):
    assert main(["plan", "--model", "openai/gpt-oss-120b", "--gpu", "h100-sxm", "-o", "yaml"]) == 0
    assert "tensorParallelSize: 2" in capsys.readouterr().out  # the cheapest per good request
    assert main(["plan", "--model", "openai/gpt-oss-120b", "--gpu", "h100-sxm"]) == 0
    table = capsys.readouterr().out
    for label in ("layout", "why", "KV cache", "TTFT", "TPOT", "goodput", "command"):
        assert label in table


def test_textbook_breakdown(capsys):
    argv = ["plan", "--model", "meta-llama/Llama-3.1-405B", "--gpu", "h100-sxm",
            "--breakdown", "textbook", "--concurrency", "4",
            "--input-tokens", "4096", "--output-tokens", "4096"]  # fmt: skip
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "16,911,433,728" in out and "5,368,709,120" in out and "10 GB" in out


@pytest.mark.slow
@pytest.mark.parametrize(
    "argv,fragment",
    [
        (["--model", "meta-llama/Llama-3.1-8b-nope", "--gpu", "l4"], "closest catalog ids"),
        (["--model", "meta-llama/Llama-3.1-8B", "--gpu", "h100", "--tp", "1"], "unknown GPU"),
        (["--model", "meta-llama/Llama-3.1-8B", "--gpu", "l4", "--tp", "3"], "tp=3"),
        (["--model", "meta-llama/Llama-3.1-405B", "--gpu", "l4"], "GiB weights"),
        (
            ["--model", "meta-llama/Llama-3.1-8B", "--gpu", "l4", "--mem-fraction-static", "0.8"],
            "SGLang flag",
        ),
        (["--model", "/nonexistent/config.json", "--gpu", "l4"], "no such config file"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(argv, fragment):
    run = subprocess.run(
        [sys.executable, "-m", "tokenfleet.cli", "plan", *argv],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert run.returncode == 2
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and fragment in lines[0]
    assert "Traceback" not in run.stderr


@pytest.mark.slow
def test_config_missing_field_is_named(tmp_path):
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"hidden_size": 1024, "num_hidden_layers": 4}))
    run = subprocess.run(
        [sys.executable, "-m", "tokenfleet.cli", "plan", "--model", str(path), "--gpu", "l4"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert run.returncode == 2 and "num_attention_heads" in run.stderr
    assert "Traceback" not in run.stderr


@pytest.mark.parametrize(
    "command,fragment", [("models", "openai/gpt-oss-120b"), ("gpus", "mi300x")]
)
def test_catalog_listings(capsys, command, fragment):
    assert main([command]) == 0
    assert fragment in capsys.readouterr().out


def test_target_rps_json_carries_the_fleet(capsys):
    doc = _json(capsys, "--model", "meta-llama/Llama-3.1-8B", "--gpu", "h100-sxm",
                "--target-rps", "12", "--ttft-slo-ms", "1000", "--tpot-slo-ms", "100")  # fmt: skip
    fleet = doc["fleet"]
    keys = {"replicas", "gpusPerReplica", "totalGpus", "tensorParallelSize",
            "pipelineParallelSize", "goodputRequestsPerSecond", "costPerHour"}  # fmt: skip
    assert keys <= fleet.keys()
    assert fleet["alternatives"] and all(keys <= a.keys() for a in fleet["alternatives"])
    assert fleet["goodputRequestsPerSecond"] >= 12
    assert fleet["totalGpus"] == fleet["replicas"] * fleet["gpusPerReplica"]
    assert doc["tensorParallelSize"] == fleet["tensorParallelSize"]


def test_table_labels_goodput_as_capacity_and_shows_the_fleet(capsys):
    argv = ["plan", "--model", "meta-llama/Llama-3.1-8B", "--gpu", "h100-sxm",
            "--target-rps", "12", "--ttft-slo-ms", "1000", "--tpot-slo-ms", "100"]  # fmt: skip
    assert main(argv) == 0
    table = capsys.readouterr().out
    assert "goodput capacity" in table and "highest Poisson rate" in table
    assert "at 16 concurrent" in table  # the throughput row states its concurrency
    assert "fleet" in table and "<- chosen" in table


def test_pp_auto_lets_a_fixed_tp_grow_stages(capsys):
    doc = _json(capsys, "--model", "meta-llama/Llama-3.1-70B", "--gpu", "l4", "--tp", "4",
                "--pp", "auto")  # fmt: skip
    assert doc["tensorParallelSize"] == 4 and doc["pipelineParallelSize"] > 1
    assert main(["plan", "--model", "meta-llama/Llama-3.1-70B", "--gpu", "l4", "--tp", "4"]) != 0
    assert "--pp auto" in capsys.readouterr().err
