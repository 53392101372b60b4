"""`tokenfleet bench` as a user runs it: result files, report on stdout, progress line."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from bench_fake_openai import FakeOpenAI, fake_in_thread

from tokenfleet.bench.client import Progress
from tokenfleet.cli import main

BASE = ["--num-prompts", "3", "--random-input-len", "4", "--random-output-len", "2"]


@pytest.fixture
def url() -> Iterator[str]:
    with fake_in_thread(FakeOpenAI()) as base_url:
        yield base_url


@pytest.mark.parametrize(
    ("flags", "expected"),
    [
        (["--save-result", "named.json"], "named.json"),
        (["--save-result", "--result-filename", "other.json"], "other.json"),
        (["--save-result", "x.json", "--result-dir", "out"], "out/x.json"),
    ],
)
def test_result_file_locations(
    url: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    flags: list[str],
    expected: str,
) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(["bench", "--base-url", url, *BASE, "--disable-tqdm", *flags]) == 0
    assert json.loads((tmp_path / expected).read_text())["completed"] == 3


def test_default_result_name_like_vllm(
    url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    argv = ["bench", "--base-url", url, *BASE, "--max-concurrency", "2", "--save-result"]
    assert main(argv) == 0
    [saved] = list(tmp_path.glob("*.json"))
    assert saved.name.startswith("openai-infqps-concurrency2-model-1-")


def test_report_on_stdout_with_selected_metrics(
    url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["bench", "--base-url", url, *BASE, "--percentile-metrics", "ttft,e2el",
            "--metric-percentiles", "50,90", "--request-rate", "50",
            "--burstiness", "0.5"]  # fmt: skip
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "Successful requests:                     3" in out
    assert "Request rate configured (RPS):           50.00" in out
    assert "Burstiness factor: 0.5 (Gamma distribution)" in out
    assert "P90 TTFT (ms):" in out and "P50 E2EL (ms):" in out
    assert "Inter-token Latency" not in out and "TPOT" not in out


def test_all_requests_failing_exits_1_and_shows_the_error(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with fake_in_thread(FakeOpenAI(status=500)) as base_url:
        code = main(["bench", "--base-url", base_url, "--model", "m", *BASE])
    assert code == 1
    captured = capsys.readouterr()
    assert "HTTP 500" in captured.err
    assert "Failed requests:                         3" in captured.out


def test_unreachable_model_listing_is_a_one_line_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", "--base-url", "http://127.0.0.1:9", *BASE]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: --base-url http://127.0.0.1:9: cannot list models")
    assert "--model" in err


@pytest.mark.parametrize(("enabled", "expect_output"), [(True, True), (False, False)])
def test_progress_line(
    enabled: bool, expect_output: bool, capsys: pytest.CaptureFixture[str]
) -> None:
    progress = Progress(total=2, enabled=enabled)
    progress.update()
    progress.update()
    progress.close()
    err = capsys.readouterr().err
    assert ("2/2 requests" in err) is expect_output
