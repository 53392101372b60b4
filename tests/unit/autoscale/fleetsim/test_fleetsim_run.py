"""`tokenfleet autoscale-sim` end to end: deterministic JSON, its shape, the baselines'
invariants, errors, and that our policy is the operator's own policy.decide."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.azure_csv import autoscale_sim_json as _json
from tests.support.azure_csv import two_rate_csv
from tokenfleet.autoscale import policy
from tokenfleet.autoscale.fleetsim.run import SimOptions, make_autoscaler, prepare, run_policy
from tokenfleet.autoscale.fleetsim.traces import load_csv
from tokenfleet.cli import main


@pytest.fixture(scope="module")
def short_csv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Six minutes in the Azure format: 3 req/s, then 9 req/s from minute 2 to 4."""
    path = tmp_path_factory.mktemp("trace") / "short.csv"
    return two_rate_csv(path, 7, 360, 3.0, 9.0, (120, 240))


@pytest.mark.slow
def test_same_options_same_json(capsys: pytest.CaptureFixture[str], short_csv: Path) -> None:
    first = _json(capsys, "--trace", str(short_csv), "--seed", "3")
    assert _json(capsys, "--trace", str(short_csv), "--seed", "3") == first


@pytest.mark.slow
def test_json_shape(capsys: pytest.CaptureFixture[str], short_csv: Path) -> None:
    doc = _json(capsys, "--trace", str(short_csv), "--cold-start", "60")
    assert doc["trace"] == "short.csv"
    assert set(doc["policies"]) == {
        "tokenfleet",
        "keda",
        "kserve",
        "hpa",
        "static",
        "reactive",
        "hold",
        "oracle",
    }
    for name, row in doc["policies"].items():
        assert set(row) == {"sloAttainment", "goodput", "gpuHours", "scaleEvents"}, name
        assert 0 <= row["sloAttainment"] <= 1 and row["goodput"] >= 0 and row["gpuHours"] > 0
        assert isinstance(row["scaleEvents"], int)
    assert doc["policies"]["static"]["scaleEvents"] == 0
    assert doc["policies"]["oracle"]["gpuHours"] <= doc["policies"]["static"]["gpuHours"]
    assert doc["setup"]["coldStartSeconds"] == 60
    # Each peer says where its configuration comes from and which point of its sweep ran.
    assert set(doc["peers"]) == {"keda", "kserve", "hpa"}
    for name, peer in doc["peers"].items():
        assert peer["source"] and peer["chosenBy"] == "best", name
        assert peer["thresholds"] in [point["thresholds"] for point in peer["sweep"]], name


@pytest.mark.slow
def test_the_ideal_reactive_policy_is_late_on_a_step_by_one_cold_start(short_csv: Path) -> None:
    """The load triples at minute 2: the reactive bound orders replicas at that instant
    (not a tick sooner, unlike the oracle), and they serve a cold start later."""
    setup = prepare(load_csv(short_csv), SimOptions(cold_start=60))
    reactive = run_policy(setup, make_autoscaler("reactive", setup))
    oracle = run_policy(setup, make_autoscaler("oracle", setup))
    grew = lambda r: next(p.at for p in r.timeline if p.ready > r.timeline[0].ready)  # noqa: E731
    assert setup.need[2] > setup.need[1]
    assert grew(reactive) == 120 + 60  # ordered at 120 s, ready 60 s later
    assert grew(oracle) < 120 <= grew(reactive) - 60
    assert reactive.attainment < oracle.attainment


@pytest.mark.slow
def test_hold_keeps_the_peak_for_the_scale_down_window(short_csv: Path) -> None:
    """The load falls back at minute 4: the reactive bound drops its replicas with the
    next minute, the hold bound keeps the peak for the spec's scale-down window (180 s)."""
    setup = prepare(load_csv(short_csv), SimOptions(cold_start=60))
    assert setup.spec.autoscaling.scale_down_stabilization_seconds == 180
    reactive = run_policy(setup, make_autoscaler("reactive", setup))
    hold = run_policy(setup, make_autoscaler("hold", setup))
    peak = max(p.desired for p in reactive.timeline)
    assert peak > min(p.desired for p in reactive.timeline)
    assert all(p.desired == peak for p in hold.timeline if 255 <= p.at <= 360)
    assert all(p.desired < peak for p in reactive.timeline if 255 <= p.at <= 360)
    assert hold.gpu_hours > reactive.gpu_hours


@pytest.mark.slow
@pytest.mark.parametrize("trace", ["spike"])
def test_oracle_never_uses_more_gpu_hours_than_static(
    capsys: pytest.CaptureFixture[str], trace: str
) -> None:
    doc = _json(capsys, "--trace", trace, "--policy", "static,oracle", "--no-frontier")
    rows = doc["policies"]
    assert rows["oracle"]["gpuHours"] <= rows["static"]["gpuHours"]


@pytest.mark.slow
def test_ours_is_the_operators_policy_decide(
    monkeypatch: pytest.MonkeyPatch, short_csv: Path
) -> None:
    calls = []
    real = policy.decide

    def spy(*args, **kwargs):  # type: ignore[no-untyped-def]
        decision = real(*args, **kwargs)
        calls.append(decision)
        return decision

    monkeypatch.setattr(policy, "decide", spy)
    setup = prepare(load_csv(short_csv), SimOptions())
    ours = make_autoscaler("tokenfleet", setup)
    result = run_policy(setup, ours)
    assert len(calls) == len(result.timeline) == int(setup.trace.duration // 15)
    assert ours.decisions == calls  # type: ignore[attr-defined]
    assert calls[-1].history.capacity is not None  # the learnt capacity travelled along


@pytest.mark.slow
def test_capacity_error_reaches_our_policy_only(short_csv: Path) -> None:
    setup = prepare(load_csv(short_csv), SimOptions(capacity_error=0.5))
    ours = make_autoscaler("tokenfleet", setup)
    assert ours.history.capacity.predicted == pytest.approx(setup.predicted_capacity * 0.5)  # type: ignore[attr-defined]


@pytest.mark.slow
def test_plot_is_a_png(tmp_path: Path, short_csv: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "sim.png"
    assert (
        main(
            [
                "autoscale-sim",
                "--trace",
                str(short_csv),
                "--policy",
                "tokenfleet,oracle",
                "--plot",
                str(out),
            ]
        )
        == 0
    )
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "tokenfleet" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--policy", "knative"], "--policy=knative: is not a policy"),
        (["--capacity-error", "0"], "--capacity-error=0.0: must be positive"),
        (["--cold-start", "-1"], "--cold-start=-1.0: is negative"),
        (["--max-replicas", "0"], "--max-replicas=0: must be at least 1"),
    ],
)
def test_errors_are_one_line(
    capsys: pytest.CaptureFixture[str], short_csv: Path, argv: list[str], message: str
) -> None:
    assert main(["autoscale-sim", "--trace", str(short_csv), *argv]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1


def test_bad_csv_row_is_one_line_with_strict(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = tmp_path / "bad.csv"
    path.write_text("TIMESTAMP,ContextTokens,GeneratedTokens\n1,100,10\n2,-5,10\n")
    assert main(["autoscale-sim", "--trace", str(path), "--strict", "--no-frontier"]) == 2
    err = capsys.readouterr().err
    assert "line 3 ContextTokens=-5" in err and err.count("\n") == 1


@pytest.mark.slow
def test_rows_the_model_cannot_serve_are_dropped_and_counted(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = tmp_path / "outliers.csv"
    rows = [f"{t * 0.5},{300 + t},{40}" for t in range(200)]
    rows[7] = "3.5,9000,40"  # longer than max-model-len 8192
    rows[9] = "4.5,-5,40"  # unreadable
    path.write_text("TIMESTAMP,ContextTokens,GeneratedTokens\n" + "\n".join(rows) + "\n")
    argv = ["autoscale-sim", "--trace", str(path), "--policy", "static", "--no-frontier"]
    assert main([*argv, "-o", "json"]) == 0
    setup = json.loads(capsys.readouterr().out)["setup"]
    assert setup["requests"] == 198
    assert setup["droppedRows"] == {
        "ContextTokens is not a positive token count": 1,
        "longer than max-model-len 8192": 1,
    }
    assert main([*argv, "--strict"]) == 2
    assert "line 11 ContextTokens=-5" in capsys.readouterr().err


@pytest.mark.slow
def test_layout_flags_are_the_plan_commands(
    capsys: pytest.CaptureFixture[str], short_csv: Path
) -> None:
    """--tp reaches the replayed plan (2 GPUs per replica) and is checked as plan checks it."""
    doc = _json(capsys, "--trace", str(short_csv), "--tp", "2", "--policy", "static",
                "--no-frontier")  # fmt: skip
    assert doc["setup"]["gpusPerReplica"] == 2
    assert doc["setup"]["longPrefillTokenThreshold"] == 0
    assert main(["autoscale-sim", "--trace", str(short_csv), "--tp", "3"]) == 2
    assert "tensor-parallel size does not divide" in capsys.readouterr().err
    capped = _json(capsys, "--trace", str(short_csv), "--cap-long-prefills", "--policy",
                   "static", "--no-frontier")  # fmt: skip
    assert capped["setup"]["longPrefillTokenThreshold"] > 0
    argv = ["autoscale-sim", "--trace", str(short_csv), "--engine", "sglang", "--cap-long-prefills"]
    assert main(argv) == 2
    assert "cap-long-prefills=True: needs vLLM 0.32.0 or newer" in capsys.readouterr().err


@pytest.mark.slow
def test_replay_an_llmservice(capsys: pytest.CaptureFixture[str], short_csv: Path) -> None:
    """-f: model, GPU, layout, SLO and autoscaling bounds come from the resource."""
    example = Path(__file__).parents[4] / "examples" / "qwen3-32b-sglang.yaml"
    doc = _json(capsys, "-f", str(example), "--trace", str(short_csv), "--policy", "static",
                "--no-frontier")  # fmt: skip
    setup = doc["setup"]
    assert (setup["model"], setup["gpusPerReplica"]) == ("Qwen/Qwen3-32B", 4)
    assert main(["autoscale-sim", "-f", "/no/such.yaml", "--trace", str(short_csv)]) == 2
    assert "--filename=/no/such.yaml" in capsys.readouterr().err
    binary = short_csv.parent / "binary.yaml"
    binary.write_bytes(b"\xff\xfe\x00\xe4garbage")
    assert main(["autoscale-sim", "-f", str(binary), "--trace", str(short_csv)]) == 2
    assert "is not UTF-8 text" in capsys.readouterr().err
