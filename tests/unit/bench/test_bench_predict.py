"""`tokenfleet bench --gpu`: the plan's prediction of the same benchmark beside the
measurement, and a one-line refusal of what the prediction cannot take."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from bench_fake_openai import FakeOpenAI, fake_in_thread

from tokenfleet.cli import main
from tokenfleet.commands.bench_predict import procedure_of
from tokenfleet.errors import UserError

BASE = ["--num-prompts", "3", "--random-input-len", "64", "--random-output-len", "4",
        "--disable-tqdm"]  # fmt: skip
PLAN = ["--gpu", "l4", "--plan-model", "meta-llama/Llama-3.1-8B"]


@pytest.fixture
def url() -> Iterator[str]:
    with fake_in_thread(FakeOpenAI()) as base_url:
        yield base_url


@pytest.mark.parametrize(
    ("rate", "concurrency", "expected"),
    [
        (float("inf"), 8, "closed-loop"),
        (float("inf"), None, "burst"),
        (2.0, None, "poisson"),
    ],
)
def test_the_procedure_follows_the_load_flags(
    rate: float, concurrency: int | None, expected: str
) -> None:
    assert procedure_of(rate, 1.0, concurrency) == expected


@pytest.mark.parametrize(("rate", "burstiness", "concurrency"), [(2.0, 0.5, None), (2.0, 1.0, 4)])
def test_what_the_plan_does_not_model_is_refused(
    rate: float, burstiness: float, concurrency: int | None
) -> None:
    with pytest.raises(UserError):
        procedure_of(rate, burstiness, concurrency)


def test_prediction_printed_beside_the_measurement(
    url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["bench", "--base-url", url, *BASE, "--max-concurrency", "2", *PLAN]) == 0
    out = capsys.readouterr().out
    assert "Plan vs measured" in out
    assert "vllm bench serve --max-concurrency 2 --num-prompts 3" in out
    assert "Mean TTFT" in out and "Output throughput" in out


def test_a_flag_the_prediction_cannot_take_fails_before_any_load(
    url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["bench", "--base-url", url, *BASE, "--request-rate", "5", "--burstiness", "0.5",
            *PLAN]  # fmt: skip
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "burstiness" in err[0]
