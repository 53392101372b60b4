"""The CLI's last rough edges answer in one line (exit 2, naming the flag, the value and the
fix), never a traceback or the whole usage: a binary --silicon file, an option before the
command, a namespace Kubernetes refuses, a JSON typo in --extra-body, an LLMService without
a name, and `tokenfleet demo`'s numbers out of range."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from tokenfleet.cli import main

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"


def _one_line(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    return lines[0]


def test_a_binary_silicon_file_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    blob = tmp_path / "rows.csv"
    blob.write_bytes(bytes(range(256)) * 8)
    assert main(["calibrate", "--perf", "--silicon", str(blob)]) == 2
    line = _one_line(capsys)
    assert f"silicon={blob}" in line and "not UTF-8 text" in line and "CSV" in line, line


def test_an_option_before_the_command_is_named(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["--bogus"])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert "unrecognized option --bogus" in err and "tokenfleet plan --help" in err, err


def test_top_level_options_still_work(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["--version"])
    assert exit_.value.code == 0
    # An option after the command is its parser's: plan's --help prints plan's own help.
    with pytest.raises(SystemExit):
        main(["plan", "--help"])
    assert "--target-rps" in capsys.readouterr().out


def test_render_refuses_a_namespace_kubernetes_refuses(
    capsys: pytest.CaptureFixture[str],
) -> None:
    example = str(EXAMPLES / "llama-3.1-8b-l4.yaml")
    assert main(["render", "-n", "Bad_NS", "-f", example]) == 2
    line = _one_line(capsys)
    assert "--namespace=Bad_NS" in line and "DNS-1123" in line and "e.g. bad-ns" in line, line
    # A DNS-1123 label may start with a digit (unlike a Service name): it renders.
    assert main(["render", "-n", "1team", "-f", example]) == 0
    docs = [d for d in yaml.safe_load_all(capsys.readouterr().out) if d]
    assert {d["metadata"]["namespace"] for d in docs} == {"1team"}


def test_render_refuses_a_bad_namespace_in_the_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    body = yaml.safe_load((EXAMPLES / "llama-3.1-8b-l4.yaml").read_text())
    body["metadata"]["namespace"] = "Team_A"
    path = tmp_path / "llm.yaml"
    path.write_text(yaml.safe_dump(body))
    assert main(["render", "-f", str(path)]) == 2
    line = _one_line(capsys)
    assert "metadata.namespace=Team_A" in line and "e.g. team-a" in line, line


def test_a_missing_name_suggests_one_from_the_model(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    body = yaml.safe_load((EXAMPLES / "llama-3.1-8b-l4.yaml").read_text())
    del body["metadata"]["name"]
    path = tmp_path / "llm.yaml"
    path.write_text(yaml.safe_dump(body))
    assert main(["render", "-f", str(path)]) == 2
    line = _one_line(capsys)
    model = body["spec"]["model"]["id"].rsplit("/", 1)[-1].lower().replace(".", "-")
    assert "metadata.name=<missing>" in line and f"e.g. {model}" in line, line
    assert "e.g. llm-" not in line


@pytest.mark.parametrize(
    ("value", "problem"),
    [("{bad", "not JSON"), ("[1, 2]", "a JSON list, not an object")],
)
def test_bench_extra_body_typo_is_one_line(
    value: str, problem: str, capsys: pytest.CaptureFixture[str]
) -> None:
    # Checked before any request: the URL is never contacted.
    assert main(["bench", "--base-url", "http://127.0.0.1:9", "--extra-body", value]) == 2
    line = _one_line(capsys)
    assert f"--extra-body {value!r}" in line and problem in line and "top_p" in line, line


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--high", "-1"], "--high -1: must be > 0"),
        (["--low", "-0.5"], "--low -0.5: must be >= 0"),
        (["--cold-start", "-5"], "--cold-start -5: must be >= 0"),
        (["--sample", "0"], "--sample 0: must be > 0"),
        (["--ramp", "-1"], "--ramp -1: must be >= 0"),
        (["--time-scale", "nan"], "--time-scale nan: must be > 0"),
    ],
)
def test_demo_numbers_out_of_range_are_refused_before_the_run(
    argv: list[str],
    message: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import tokenfleet.localfleet.demo as demo

    async def started(*_: object) -> int:
        raise AssertionError("the demo started")

    monkeypatch.setattr(demo, "run_demo", started)
    assert main(["demo", "--plot", str(tmp_path / "demo.png"), *argv]) == 2
    assert message in _one_line(capsys)
