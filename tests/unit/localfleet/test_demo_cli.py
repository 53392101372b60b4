"""`tokenfleet demo` refuses bad options with one line naming the flag, before starting
anything."""

from __future__ import annotations

import pytest

from tokenfleet.cli import main


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--phases", "180,720"], "--phases '180,720': give three positive"),
        (["--phases", "180,x,900"], "--phases '180,x,900'"),
        (["--phases", "180,0,900"], "--phases '180,0,900'"),
        (["--time-scale", "0"], "--time-scale 0.0: must be > 0"),
        (["-f", "no/such/file.yaml"], "-f no/such/file.yaml: no such file"),
    ],
)
def test_bad_options_exit_2_with_one_line(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["demo", *argv]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1, err
