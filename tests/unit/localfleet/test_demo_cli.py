"""`tokenfleet demo` refuses bad options with one line naming the flag, before starting
anything."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest

from tokenfleet.cli import main
from tokenfleet.commands.demo import DEFAULT_EXAMPLE, packaged_example
from tokenfleet.localfleet.demo import load_llmservice


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--phases", "180,720"], "--phases '180,720': give three positive"),
        (["--phases", "180,x,900"], "--phases '180,x,900'"),
        (["--phases", "180,0,900"], "--phases '180,0,900'"),
        (["--time-scale", "0"], "--time-scale 0: must be > 0"),
        (["-f", "no/such/file.yaml"], "-f no/such/file.yaml: no such file"),
    ],
)
def test_bad_options_exit_2_with_one_line(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["demo", *argv]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1, err


@pytest.fixture
def temp_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Where tempfile would put the demo's work directory, so a test can see none is left."""
    root = tmp_path / "tmp"
    root.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(root))
    return root


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (bytes(range(256)) * 4, "not UTF-8 text (a binary file?)"),
        (b"kind: [unclosed", "not valid YAML at line"),
        (b"- just\n- a list\n", "no LLMService in the file"),
        (b"kind: ConfigMap\n", "no LLMService in the file"),
    ],
)
def test_an_unusable_file_is_one_line_and_leaves_no_temp_dir(
    content: bytes,
    message: str,
    tmp_path: Path,
    temp_root: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_bytes(content)
    assert main(["demo", "-f", str(bad)]) == 2
    err = capsys.readouterr().err
    assert f"-f {bad}: {message}" in err and err.count("\n") == 1, err
    assert list(temp_root.iterdir()) == []


def test_a_directory_as_file_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    assert main(["demo", "-f", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert f"-f {tmp_path}: is a directory" in err and err.count("\n") == 1, err


def test_a_missing_plot_directory_is_refused_before_the_run(
    tmp_path: Path, temp_root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    target = tmp_path / "missing" / "demo.png"
    assert main(["demo", "--plot", str(target)]) == 2
    err = capsys.readouterr().err
    assert f"--plot={target}: directory {target.parent} does not exist" in err
    assert err.count("\n") == 1
    assert list(temp_root.iterdir()) == []


def test_missing_prometheus_says_how_to_install_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("TOKENFLEET_PROMETHEUS", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))  # no prometheus on it
    assert main(["demo", "--plot", str(tmp_path / "demo.png")]) == 2
    err = capsys.readouterr().err
    assert "apt-get install prometheus" in err and "prometheus.io/download" in err, err
    assert err.count("\n") == 1


def test_the_default_example_ships_with_the_package() -> None:
    """`tokenfleet demo` from an installed wheel needs no checkout: the default LLMService
    is package data, the same file as the repository's examples/ copy."""
    packaged = packaged_example()
    assert packaged.is_file()
    assert load_llmservice(packaged)["kind"] == "LLMService"
    repo_copy = Path(__file__).resolve().parents[3] / "examples" / DEFAULT_EXAMPLE
    assert packaged.read_text() == repo_copy.read_text()
