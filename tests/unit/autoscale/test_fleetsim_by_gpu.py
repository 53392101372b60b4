"""`tokenfleet autoscale-sim --gpu a,b`: the same replay on each GPU type, side by side; each
type's numbers are exactly those of replaying it alone."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.azure_csv import autoscale_sim_json as _json
from tests.support.azure_csv import two_rate_csv
from tokenfleet.cli import main


@pytest.fixture(scope="module")
def short_csv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Four minutes in the Azure format at 2 req/s, 4 req/s in the middle two."""
    path = tmp_path_factory.mktemp("trace") / "short.csv"
    return two_rate_csv(path, 11, 240, 2.0, 4.0, (60, 180))


@pytest.mark.slow
def test_each_type_is_the_replay_of_that_type_alone(
    capsys: pytest.CaptureFixture[str], short_csv: Path
) -> None:
    common = ("--trace", str(short_csv), "--policy", "tokenfleet,static", "--no-frontier")
    both = _json(capsys, *common, "--gpu", "l40s,h100-sxm=2.0")
    assert [t["gpu"] for t in both["gpuTypes"]] == ["l40s", "h100-sxm"]
    for row, gpu in zip(both["gpuTypes"], ("l40s", "h100-sxm"), strict=True):
        alone = _json(capsys, *common, "--gpu", gpu)["policies"]
        for name, got in row["policies"].items():
            assert got["sloAttainment"] == alone[name]["sloAttainment"]
            assert got["gpuHours"] == alone[name]["gpuHours"]
            assert got["dollars"] == pytest.approx(got["gpuHours"] * row["pricePerHour"], abs=0.01)
    assert both["gpuTypes"][1]["pricePerHour"] == 2.0


def test_a_plot_of_several_types_is_refused_in_one_line(
    capsys: pytest.CaptureFixture[str], short_csv: Path, tmp_path: Path
) -> None:
    argv = ["--trace", str(short_csv), "--gpu", "l40s,h100-sxm", "--plot", str(tmp_path / "p.png")]
    assert main(["autoscale-sim", *argv]) == 2
    err = capsys.readouterr().err
    assert "--gpu=l40s,h100-sxm: names several types" in err and err.count("\n") == 1


def test_the_verdict_names_a_type_only_when_it_dominates() -> None:
    from types import SimpleNamespace
    from typing import Any

    from tokenfleet.capacity.gpu_choice import GpuCandidate
    from tokenfleet.capacity.gpus import get_gpu
    from tokenfleet.commands.autoscale_sim_gpus import TypeRun, verdict

    def run(gpu: str, attainment: float, hours: float) -> TypeRun:
        result: Any = SimpleNamespace(attainment=attainment, gpu_hours=hours)
        return TypeRun(GpuCandidate(get_gpu(gpu)), None, {"tokenfleet": result}, ())  # type: ignore[arg-type]

    # The Azure code trace: the H100 reaches more for fewer dollars.
    text = verdict([run("l40s", 0.8632, 17.31), run("h100-sxm", 0.9711, 4.09)])
    assert text.endswith("h100-sxm reaches the most for the least")
    assert "l40s 86.32% for $32.20; h100-sxm 97.11% for $14.31" in text
    traded = verdict([run("l40s", 0.99, 1.0), run("h100-sxm", 1.0, 1.0)])
    assert traded.endswith("more attainment costs more here; choose by the SLO you need")
