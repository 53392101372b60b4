"""The PromQL of reference/engines.md over a REAL Prometheus scraping TWO simulators under
known load returns what the load implies.

Each simulator runs at TIME_SCALE x real time: counters and their rates are per real second
(Prometheus timestamps are real), while histogram values (TTFT) are simulated seconds.

The truth each query is held to is what the load did, counted, never a wall-clock margin:
the simulators' own histograms read from their /metrics after the run (what Prometheus
scraped, summed without PromQL) and the completion times the client observed. The
tolerances follow from the vLLM bucket edges (histogram_quantile only knows which bucket a
quantile falls in) and from rate()'s extrapolation over 1 s scrapes, so a busy machine
cannot fail them.
"""

from __future__ import annotations

import asyncio
import bisect
import math
import re
import time
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
from prometheus_client.utils import floatToGoString

from tests.support.prometheus import Prometheus, running_prometheus
from tests.support.sims import SimProcess, running_sim
from tokenfleet.bench.aggregate import RequestOutput
from tokenfleet.bench.client import BenchConfig, run_benchmark
from tokenfleet.bench.dataset import DatasetSpec

pytestmark = pytest.mark.system

TIME_SCALE = 2.0
RATE_PER_SIM = 4.0  # real requests/s to each simulator, perfectly regular
LOAD_S = 16.0
# vLLM's TTFT buckets (reference/engines.md), in seconds.
TTFT_BUCKETS = (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5,
                5.0, 7.5, 10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0)  # fmt: skip


@dataclass
class LoadRun:
    outputs: list[RequestOutput]
    started: float  # unix seconds
    ended: float
    targets: list[str]
    perf_at_start: float  # time.perf_counter() at `started` (RequestOutput times use it)
    ttft_buckets: dict[float, float]  # le -> cumulative count, both simulators summed

    def completed_at(self, output: RequestOutput) -> float:
        """Unix time at which the client saw the request complete."""
        return self.started + output.start_time + output.latency - self.perf_at_start

    def ttft_quantile_bucket(self, q: float) -> tuple[float, float]:
        """Edges of the bucket holding the q-quantile of the simulators' own TTFTs."""
        total = self.ttft_buckets[math.inf]
        le = next(le for le in sorted(self.ttft_buckets) if self.ttft_buckets[le] >= q * total)
        return bucket_edges(le)


def own_ttft_buckets(*sims: SimProcess) -> dict[float, float]:
    out: dict[float, float] = {}
    for sim in sims:
        for key, value in sim.metrics().items():
            if key.startswith("vllm:time_to_first_token_seconds_bucket{"):
                le = float(re.search(r"le=([^,}]+)", key).group(1))  # type: ignore[union-attr]
                out[le] = out.get(le, 0.0) + value
    return out


def bucket_edges(value: float) -> tuple[float, float]:
    """(lower, upper] edges of the vLLM TTFT bucket holding `value`."""
    i = bisect.bisect_left(TTFT_BUCKETS, value)
    lower = TTFT_BUCKETS[i - 1] if i > 0 else 0.0
    upper = TTFT_BUCKETS[i] if i < len(TTFT_BUCKETS) else math.inf
    return lower, upper


@pytest.fixture(scope="module")
def load(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Prometheus, LoadRun]]:
    workdir = tmp_path_factory.mktemp("promql")
    with (
        running_prometheus(workdir / "prometheus") as prom,
        running_sim(workdir / "a", TIME_SCALE) as sim_a,
        running_sim(workdir / "b", TIME_SCALE) as sim_b,
    ):
        targets = [sim_a.target, sim_b.target]
        prom.set_targets(targets)
        prom.wait_targets_up(targets)
        yield prom, _drive(sim_a, sim_b, targets)


def _drive(sim_a: SimProcess, sim_b: SimProcess, targets: list[str]) -> LoadRun:
    count = int(RATE_PER_SIM * LOAD_S)

    def config(sim: SimProcess, seed: int) -> BenchConfig:
        return BenchConfig(
            base_url=sim.base_url,
            endpoint="/v1/completions",
            model="meta-llama/Llama-3.1-8B",
            # Prompts of 100 to 1946 tokens: prefill time, and so TTFT, spreads over
            # several vLLM buckets, which the quantile and attainment checks need.
            dataset=DatasetSpec(input_len=1024, output_len=16, range_ratio=0.9, seed=seed),
            num_prompts=count,
            request_rate=RATE_PER_SIM,
            burstiness=math.inf,
        )

    async def both() -> list[RequestOutput]:
        runs = await asyncio.gather(
            run_benchmark(config(sim_a, 1)), run_benchmark(config(sim_b, 2))
        )
        return [o for outputs, _ in runs for o in outputs]

    started, perf_at_start = time.time(), time.perf_counter()
    outputs = asyncio.run(both())
    ended = time.time()
    assert all(o.success for o in outputs), next(o.error for o in outputs if not o.success)
    buckets = own_ttft_buckets(sim_a, sim_b)  # fresh simulators: their totals are this run's
    assert buckets[math.inf] == len(outputs)
    return LoadRun(outputs, started, ended, targets, perf_at_start, buckets)


def _after_load(prom: Prometheus, run: LoadRun) -> tuple[float, str]:
    """An evaluation time whose samples include the whole run, and a range covering it."""
    prom.wait_scraped_after(run.ended, run.targets)
    at = time.time()
    window = f"{math.ceil(at - run.started) + 10}s"
    return at, window


def test_counters_sum_exactly_across_both_simulators(load: tuple[Prometheus, LoadRun]) -> None:
    prom, run = load
    at, _ = _after_load(prom, run)
    assert prom.scalar("count(up == 1)", at) == 2
    assert prom.scalar("sum(vllm:request_success_total)", at) == len(run.outputs)
    total_out = sum(o.output_tokens for o in run.outputs)
    assert prom.scalar("sum(vllm:generation_tokens_total)", at) == total_out
    assert prom.scalar("sum(vllm:time_to_first_token_seconds_count)", at) == len(run.outputs)


def test_request_rate_is_what_was_sent(load: tuple[Prometheus, LoadRun]) -> None:
    prom, run = load
    _after_load(prom, run)
    # Late in the run, with a window that starts after the first completions.
    at = run.started + 0.8 * LOAD_S
    rate = prom.scalar("sum(rate(vllm:request_success_total[8s]))", at)
    # What was completed in that window, as the client saw it (not as it was scheduled: a
    # busy client sends late, and the rate follows what happened).
    done = sum(at - 8.0 < run.completed_at(o) <= at for o in run.outputs)
    # rate() over 1 s scrapes sees each window edge to within a scrape, about one request
    # per series per edge, and extrapolates: allow twice that (8 requests / 8 s).
    assert rate == pytest.approx(done / 8.0, abs=8 / 8.0), (rate, done)
    assert done > 0


def test_p95_ttft_lies_in_the_simulators_own_buckets(
    load: tuple[Prometheus, LoadRun],
) -> None:
    prom, run = load
    at, window = _after_load(prom, run)
    p95 = prom.scalar(
        "histogram_quantile(0.95, sum by (le) "
        f"(rate(vllm:time_to_first_token_seconds_bucket[{window}])))",
        at,
    )
    # rate() extrapolates the two targets by slightly different factors, which can move the
    # rank by a request or two: allow the buckets of the 0.93 and 0.97 quantiles.
    low, high = run.ttft_quantile_bucket(0.93)[0], run.ttft_quantile_bucket(0.97)[1]
    assert low <= p95 <= high, (low, high, p95)


def test_attainment_at_a_bucket_boundary(load: tuple[Prometheus, LoadRun]) -> None:
    prom, run = load
    at, window = _after_load(prom, run)
    buckets, total = run.ttft_buckets, run.ttft_buckets[math.inf]
    # The boundary that splits the simulators' own TTFTs most evenly: a non-trivial answer.
    boundary = min(TTFT_BUCKETS, key=lambda b: abs(buckets[b] / total - 0.5))
    assert 0 < buckets[boundary] < total
    le = floatToGoString(boundary)
    attainment = prom.scalar(
        f'sum(rate(vllm:time_to_first_token_seconds_bucket{{le="{le}"}}[{window}])) / '
        f"sum(rate(vllm:time_to_first_token_seconds_count[{window}]))",
        at,
    )
    # Exact at a bucket edge; 0.02 covers rate() extrapolating the two targets differently.
    assert attainment == pytest.approx(buckets[boundary] / total, abs=0.02), (boundary, attainment)
