"""`tokenfleet autoscale-sim` replays one LLMServiceSpec: a replayed resource's fields stay
its own unless a flag is given (a flag's default never replaces them), and the spec the
replayed operator acts on is that one, at the trace's lengths."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from tokenfleet.autoscale.fleetsim.run import prepare
from tokenfleet.autoscale.fleetsim.traces import load_csv
from tokenfleet.cli import build_parser, main
from tokenfleet.commands.autoscale_sim import options

EXAMPLE = Path(__file__).parents[4] / "examples" / "llama-3.1-8b-l4-scale-to-zero.yaml"


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The scale-to-zero example with a 120 s idle release and a 45 s decision interval."""
    text = EXAMPLE.read_text().replace(
        "scaleToZeroAfterSeconds: 600", "scaleToZeroAfterSeconds: 120"
    )
    text = text.replace("    maxReplicas: 4\n", "    maxReplicas: 4\n    intervalSeconds: 45\n")
    path = tmp_path_factory.mktemp("service") / "zero.yaml"
    path.write_text(text)
    return path


@pytest.fixture(scope="module")
def trace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    rng = random.Random(5)
    rows, t = ["TIMESTAMP,ContextTokens,GeneratedTokens"], 0.0
    while t < 120:
        t += rng.expovariate(1.0)
        rows.append(f"{t:.3f},{rng.randint(200, 1000)},{rng.randint(20, 100)}")
    path = tmp_path_factory.mktemp("trace") / "trace.csv"
    path.write_text("\n".join(rows) + "\n")
    return path


def _options(*argv: str):
    return options(build_parser().parse_args(["autoscale-sim", *argv]))


def test_the_resources_fields_are_replayed_not_the_flags_defaults(service: Path) -> None:
    auto = _options("-f", str(service), "--trace", "steady").spec.autoscaling
    assert auto.scale_to_zero_after_seconds == 120
    assert (auto.min_replicas, auto.max_replicas, auto.interval_seconds) == (0, 4, 45)


def test_a_given_flag_replaces_the_resources_field(service: Path) -> None:
    replay = _options("-f", str(service), "--trace", "steady", "--scale-to-zero-after", "300")
    assert replay.spec.autoscaling.scale_to_zero_after_seconds == 300
    assert replay.spec.slo.ttft_ms == 1000  # the resource's, no flag given


def test_without_a_resource_the_operators_defaults() -> None:
    replay = _options("--trace", "steady", "--min-replicas", "0", "--ttft-slo-ms", "800")
    auto = replay.spec.autoscaling
    assert (auto.scale_to_zero_after_seconds, auto.min_replicas) == (600, 0)
    assert replay.spec.slo.ttft_ms == 800 and replay.peak_max_replicas


def test_a_model_flag_with_a_resource_is_refused(
    service: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["autoscale-sim", "-f", str(service), "--trace", "steady", "--gpu", "h100"]) == 2
    assert "--gpu=h100: is the LLMService's with -f" in capsys.readouterr().err


def test_a_flag_past_the_apis_bound_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["autoscale-sim", "--trace", "steady", "--min-replicas", "0"]
    assert main([*argv, "--scale-to-zero-after", "5"]) == 2
    assert "scaleToZeroAfterSeconds=5" in capsys.readouterr().err


@pytest.mark.slow
def test_the_replayed_operator_acts_on_the_resources_spec(service: Path, trace: Path) -> None:
    """The regression: the flag's default 600 replaced the resource's 120 in prepare()."""
    replay = _options("-f", str(service), "--trace", str(trace))
    spec = prepare(load_csv(trace), replay).spec
    assert spec.autoscaling.scale_to_zero_after_seconds == 120
    assert spec.autoscaling.interval_seconds == 45 and spec.routing.enabled
    assert spec.autoscaling.max_replicas == 4  # the resource's, not twice the static peak
