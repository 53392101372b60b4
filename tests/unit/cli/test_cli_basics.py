"""The small things a newcomer tries first: --version, -o everywhere, --help, crd --check."""

import json

import pytest
import yaml

from tokenfleet import __version__
from tokenfleet.cli import main


def test_version(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["--version"])
    assert exit_.value.code == 0
    # The checkout's editable install runs the scheduler core as Python source
    # (tests/system/test_compiled_core.py checks the compiled build says so).
    assert (
        capsys.readouterr().out.strip() == f"tokenfleet {__version__} (scheduler core: pure Python)"
    )


TEXTBOOK = ["plan", "--model", "meta-llama/Llama-3.1-405B", "--gpu", "h100-sxm",
            "--breakdown", "textbook", "--concurrency", "4",
            "--input-tokens", "4096", "--output-tokens", "4096"]  # fmt: skip


@pytest.mark.parametrize("output,load", [("json", json.loads), ("yaml", yaml.safe_load)])
def test_textbook_breakdown_honours_output(capsys, output, load):
    assert main([*TEXTBOOK, "-o", output]) == 0
    doc = load(capsys.readouterr().out)
    rows = {r["part"]: r["bytes"] for r in doc["rows"]}
    assert 16_911_433_728 in rows.values()  # the source's 8K-token KV line, exact
    assert doc["batch"] == 4 and doc["context"] > 0 and doc["totalBytes"] > 16_911_433_728
    assert any("10 GB" in note for note in doc["notes"])


@pytest.mark.parametrize("command", ["models", "gpus"])
def test_catalogs_have_yaml(capsys, command):
    assert main([command, "-o", "yaml"]) == 0
    rows = yaml.safe_load(capsys.readouterr().out)
    assert main([command, "-o", "json"]) == 0
    assert rows == json.loads(capsys.readouterr().out)


def test_plan_help_shows_defaults(monkeypatch, capsys):
    monkeypatch.setenv("COLUMNS", "300")  # one line per option: no wrapping inside a default
    with pytest.raises(SystemExit):
        main(["plan", "--help"])
    text = capsys.readouterr().out
    for shown in ("batch size; default: 16)", "(default: 2048)", "(default: 300)",
                  "(default: 500 ms)", "(default: 50 ms)", "default: vllm",
                  "(default: cost)", "(default: 4)"):  # fmt: skip
        assert shown in text


def test_crd_check_names_a_missing_file(tmp_path, capsys):
    missing = tmp_path / "nope.yaml"
    assert main(["crd", "--check", "-o", str(missing)]) == 1
    err = capsys.readouterr().err
    assert "not found" in err and "out of date" not in err
    stale = tmp_path / "stale.yaml"
    stale.write_text("kind: CustomResourceDefinition\n")
    assert main(["crd", "--check", "-o", str(stale)]) == 1
    assert "out of date" in capsys.readouterr().err
