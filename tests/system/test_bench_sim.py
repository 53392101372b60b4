"""`tokenfleet bench` against `tokenfleet sim`: the client's numbers agree with the
simulator's own /metrics (request and token counts exactly, mean TTFT within tolerance).

The simulator runs `--time-scale` times faster than real time and reports its histograms in
simulated seconds, so a TTFT the client measures in real seconds is multiplied by the scale
before comparing. The client's TTFT also contains HTTP and event-loop time the simulator
does not count, so the comparison uses causal bounds, never a wall-clock margin.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.sims import SimProcess, running_sim
from tokenfleet.cli import main

pytestmark = pytest.mark.system

# Real time here: the client's own overhead (HTTP, JSON, a 2-core box shared with other
# test processes: 10-30 ms measured under load) would be multiplied by a larger scale.
TIME_SCALE = 1.0


def family_total(metrics: dict[str, float], name: str) -> float:
    """Sum of every sample of `name` across label sets."""
    return sum(v for k, v in metrics.items() if k.startswith(name + "{"))


@pytest.fixture(scope="module")
def sim(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimProcess]:
    with running_sim(tmp_path_factory.mktemp("sim"), TIME_SCALE) as server:
        yield server


def _bench(sim: SimProcess, tmp_path: Path, *extra: str) -> dict[str, object]:
    result = tmp_path / "result.json"
    code = main(
        ["bench", "--base-url", sim.base_url, "--disable-tqdm", "--save-result", str(result),
         *extra]
    )  # fmt: skip
    assert code == 0
    return dict(json.loads(result.read_text()))


@pytest.mark.parametrize(
    ("endpoint", "argv"),
    [
        (
            "/v1/completions",
            ["--num-prompts", "24", "--random-input-len", "1024", "--random-output-len", "12",
             "--max-concurrency", "8"],
        ),
        (
            "/v1/chat/completions",
            ["--num-prompts", "16", "--random-input-len", "1024", "--random-output-len", "8",
             "--random-range-ratio", "0.5", "--request-rate", "8", "--seed", "3"],
        ),
    ],
)  # fmt: skip
def test_bench_numbers_match_the_simulators_metrics(
    sim: SimProcess, tmp_path: Path, endpoint: str, argv: list[str]
) -> None:
    before = sim.metrics()
    result = _bench(sim, tmp_path, "--endpoint", endpoint, *argv)
    after = sim.metrics()

    def delta(name: str) -> float:
        return family_total(after, name) - family_total(before, name)

    num_prompts = int(argv[argv.index("--num-prompts") + 1])
    assert result["completed"] == num_prompts
    assert result["failed"] == 0
    # Counts agree exactly: every request, prompt token and generated token.
    assert delta("vllm:request_success_total") == num_prompts
    assert delta("vllm:prompt_tokens_total") == result["total_input_tokens"]
    assert delta("vllm:generation_tokens_total") == result["total_output_tokens"]
    # ignore_eos: each request generated exactly what it asked for.
    output_lens = result["output_lens"]
    assert isinstance(output_lens, list)
    assert sum(output_lens) == result["total_output_tokens"]
    assert delta("vllm:time_to_first_token_seconds_count") == num_prompts

    # Mean TTFT: the simulator's (simulated s) vs the client's (real s x time scale). Both
    # bounds are causal, not wall-clock margins (a busy machine only widens the gap they
    # allow): the client cannot see a first token before the simulator produced it, and it
    # must see it before the rest of the output, which the simulator spends at least
    # (e2e - TTFT) producing. Measuring TTFT at the end of the response (or at the headers
    # before any token) breaks one of them.
    sim_mean = delta("vllm:time_to_first_token_seconds_sum") / num_prompts
    sim_decode = delta("vllm:e2e_request_latency_seconds_sum") / num_prompts - sim_mean
    client_mean = float(result["mean_ttft_ms"]) / 1000.0 * TIME_SCALE  # type: ignore[arg-type]
    client_e2e = float(result["mean_e2el_ms"]) / 1000.0 * TIME_SCALE  # type: ignore[arg-type]
    assert sim_decode > 0
    assert sim_mean * 0.9 <= client_mean, (sim_mean, client_mean)
    assert client_mean <= client_e2e - 0.5 * sim_decode, (client_mean, client_e2e, sim_decode)
