"""`tokenfleet plan --benchmark`: a benchmark run predicted beside the steady state, which
stays the default and says so."""

from __future__ import annotations

import json

import pytest

from tokenfleet.cli import main

PLAN = ["plan", "--model", "meta-llama/Llama-3.1-8B", "--gpu", "h100-sxm", "--tp", "1",
        "--concurrency", "8", "--input-tokens", "1024", "--output-tokens", "128"]  # fmt: skip


def test_the_default_is_the_steady_state_and_says_so(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(PLAN) == 0
    out = capsys.readouterr().out
    assert "steady state: warm-up not counted" in out
    assert "--benchmark predicts a benchmark run" in out
    assert "vllm bench serve" not in out


@pytest.mark.parametrize(
    ("flags", "procedure", "command"),
    [
        (["--benchmark", "closed-loop", "--num-prompts", "80"], "closed-loop",
         "vllm bench serve --max-concurrency 8 --num-prompts 80"),
        (["--benchmark", "burst", "--num-prompts", "40"], "burst",
         "vllm bench serve --request-rate inf --num-prompts 40"),
        (["--benchmark", "poisson", "--num-prompts", "60", "--request-rate", "4"], "poisson",
         "vllm bench serve --request-rate 4 --num-prompts 60"),
    ],
)  # fmt: skip
def test_a_benchmark_procedure_is_predicted(
    capsys: pytest.CaptureFixture[str], flags: list[str], procedure: str, command: str
) -> None:
    assert main([*PLAN, *flags, "-o", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    bench = doc["benchmark"]
    assert bench["procedure"] == procedure and bench["command"] == command
    assert bench["ttftMeanMs"] > 0 and bench["tpotMeanMs"] > 0
    assert bench["outputTokensPerSecond"] > 0
    # The steady state is still there, unchanged by the flag.
    assert doc["predicted"]["ttftMs"] > 0


def test_a_burst_queues_where_the_steady_state_does_not(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main([*PLAN, "--benchmark", "burst", "--num-prompts", "400", "-o", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["benchmark"]["ttftMeanMs"] > 5 * doc["predicted"]["ttftMs"]


@pytest.mark.parametrize(
    ("flags", "field"),
    [
        (["--benchmark", "poisson"], "request-rate"),
        (["--benchmark", "poisson", "--request-rate", "0"], "request-rate"),
        (["--request-rate", "3"], "request-rate"),
        (["--benchmark", "burst", "--num-prompts", "0"], "num-prompts"),
    ],
)
def test_bad_benchmark_flags_are_one_line_errors(
    capsys: pytest.CaptureFixture[str], flags: list[str], field: str
) -> None:
    assert main([*PLAN, *flags]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and field in err[0]
