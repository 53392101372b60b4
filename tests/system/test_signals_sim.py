"""autoscale/signals.py and autoscale/prometheus.py against a REAL Prometheus scraping
`tokenfleet sim` processes under load from `tokenfleet bench`'s client.

Four simulators, labelled as the PodMonitor would label their pods (file_sd target labels
llmservice / namespace / pod): two vLLM pods of LLMService team-a/chat, one vLLM 0.10 pod
(older metric names) of team-b/chat (same name, other namespace: scoping), and one SGLang
pod of team-a/sg. Every signal is compared with what the load generator itself measured.

Units: the simulators run TIME_SCALE x faster than real time; their histograms are in
simulated seconds (the client's real seconds x TIME_SCALE), counters' rates in real seconds.
The client also counts its own HTTP / event-loop time, so per request
    client * TIME_SCALE - OVERHEAD * TIME_SCALE <= simulator <= client * TIME_SCALE,
and the tolerances below follow from that, from the bucket edges and from rate()
extrapolating over 1 s scrapes.
"""

from __future__ import annotations

import asyncio
import bisect
import math
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support.prometheus import Prometheus, running_prometheus
from tests.support.sims import SimProcess, launch_sim
from tokenfleet.autoscale.prometheus import (
    EmptyResult,
    NonFiniteValue,
    PrometheusClient,
    PrometheusUnreachable,
    PromQLError,
    StaleSample,
)
from tokenfleet.autoscale.signals import Observation, SignalsQuery, pod_load, read_signals
from tokenfleet.bench.aggregate import RequestOutput, tpot_seconds
from tokenfleet.bench.client import BenchConfig, run_benchmark
from tokenfleet.bench.dataset import DatasetSpec
from tokenfleet.controller.prometheus_source import PrometheusSource
from tokenfleet.engines import engine_info

pytestmark = pytest.mark.system

MODEL = "meta-llama/Llama-3.1-8B"
TIME_SCALE = 2.0
RATE_PER_SIM = 3.0  # real requests/s to each simulator, perfectly regular
LOAD_S = 12.0
OUTPUT_TOKENS = 16
OVERHEAD_S = 0.05  # real seconds of client-only time allowed per request
QUIET_S = 6.0  # scraped idle time before the load: the zero-load reading needs it
CONCURRENCY = 4  # closed-loop phase: requests in flight per chat pod


@dataclass
class Pod:
    sim: SimProcess
    engine: str
    namespace: str
    llmservice: str
    pod: str

    @property
    def target(self) -> str:
        return f"127.0.0.1:{self.sim.port}"


@dataclass
class Fleet:
    prom: Prometheus
    pods: list[Pod]
    outputs: dict[str, list[RequestOutput]]  # pod -> what the client measured
    quiet_at: float  # a moment in the idle period before the load
    started: float
    ended: float

    def of(self, namespace: str, llmservice: str) -> list[RequestOutput]:
        return [
            o
            for p in self.pods
            if (p.namespace, p.llmservice) == (namespace, llmservice)
            for o in self.outputs[p.pod]
        ]


def query(engine: str, namespace: str, llmservice: str, *, ttft: float, tpot: float,
          window: float) -> SignalsQuery:  # fmt: skip
    return SignalsQuery(engine, namespace, llmservice, ttft, tpot, 0.95, window)


def read(fleet: Fleet, q: SignalsQuery, at: float) -> Observation:
    """Through the operator's own source (what controller/autoscaler.py calls each tick)."""

    async def go() -> Observation:
        source = PrometheusSource()
        try:
            return await source.signals(q, fleet.prom.url, at)
        finally:
            await source.close()

    return asyncio.run(go())


def _config(pod: Pod, seed: int, **kw: object) -> BenchConfig:
    base: dict[str, object] = {
        "base_url": pod.sim.base_url,
        "endpoint": "/v1/completions",
        "model": MODEL,
        # Prompts of 100-1946 tokens: TTFT spreads over several buckets of either engine.
        "dataset": DatasetSpec(
            input_len=1024, output_len=OUTPUT_TOKENS, range_ratio=0.9, seed=seed
        ),
        "num_prompts": int(RATE_PER_SIM * LOAD_S),
        "request_rate": RATE_PER_SIM,
        "burstiness": math.inf,
    }
    return BenchConfig(**{**base, **kw})  # type: ignore[arg-type]


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Fleet]:
    workdir = tmp_path_factory.mktemp("signals")
    common = ["--model", MODEL, "--gpu", "l4", "--max-model-len", "8192",
              "--time-scale", str(TIME_SCALE)]  # fmt: skip
    specs = [
        ("vllm", [], "team-a", "chat", "chat-0"),
        ("vllm", [], "team-a", "chat", "chat-1"),
        ("vllm", ["--engine-version", "0.10.2"], "team-b", "chat", "chat-old-0"),
        ("sglang", ["--engine", "sglang"], "team-a", "sg", "sg-0"),
    ]
    pods: list[Pod] = []
    with running_prometheus(workdir / "prometheus") as prom:
        try:
            for engine, extra, namespace, name, pod in specs:
                sim = launch_sim([*common, *extra], workdir / f"{pod}.log")
                pods.append(Pod(sim, engine, namespace, name, pod))
            prom.set_target_groups(
                [
                    (
                        [p.target],
                        {"namespace": p.namespace, "llmservice": p.llmservice, "pod": p.pod},
                    )
                    for p in pods
                ]
            )
            targets = [p.target for p in pods]
            prom.wait_targets_up(targets)
            quiet_from = time.time()
            prom.wait_scraped_after(quiet_from + QUIET_S, targets)
            quiet_at = time.time()

            async def load() -> list[list[RequestOutput]]:
                runs = await asyncio.gather(
                    *(run_benchmark(_config(p, seed=i + 1)) for i, p in enumerate(pods))
                )
                return [outputs for outputs, _ in runs]

            started = time.time()
            results = asyncio.run(load())
            ended = time.time()
            outputs = {p.pod: r for p, r in zip(pods, results, strict=True)}
            for pod_outputs in outputs.values():
                assert all(o.success for o in pod_outputs), [o.error for o in pod_outputs]
            prom.wait_scraped_after(ended, targets)
            yield Fleet(prom, pods, outputs, quiet_at, started, ended)
        finally:
            for p in pods:
                p.sim.stop()


def _after(fleet: Fleet) -> tuple[float, float]:
    """An evaluation time after the load and a window covering all of it."""
    at = time.time()
    return at, math.ceil(at - fleet.started) + 5.0


def ttfts(outputs: list[RequestOutput]) -> list[float]:
    return [o.ttft * TIME_SCALE for o in outputs]  # simulated seconds


def tpots(outputs: list[RequestOutput], engine: str) -> list[float | None]:
    """Per-request TPOT in simulated seconds, None where the engine records nothing: a
    one-token request has no TPOT (vLLM observes 0 for it, SGLang skips it)."""
    values: list[float | None] = []
    for o in outputs:
        tpot = tpot_seconds(o, o.output_tokens)
        if tpot is None:
            values.append(0.0 if engine == "vllm" else None)
        else:
            values.append(tpot * TIME_SCALE)
    return values


def fraction_bounds(values: list[float], boundary: float) -> tuple[float, float]:
    """The simulator's fraction <= boundary lies between these (the client's overhead)."""
    slack = OVERHEAD_S * TIME_SCALE
    at_least = sum(v <= boundary for v in values) / len(values)
    at_most = sum(v - slack <= boundary for v in values) / len(values)
    return at_least, at_most


def tolerance(count: int, unseen: float = 1.0) -> float:
    """Slack of a ratio of two rate()s against the client's exact fraction: 0.02 for rate()
    extrapolating the two series a little differently, plus what the observations rate()
    cannot see can shift it. A labelled histogram series born with its first request
    (SGLang's `is_streaming`) starts at the count its first scrape found: one observation,
    or more when that scrape came late; dropping k of n observations moves a fraction by at
    most k / (n - k)."""
    k = max(unseen, 1.0)
    return 0.02 + k / max(count - k, 1.0)


def unseen(fleet: Fleet, family: str, namespace: str, llmservice: str, window: float,
           at: float) -> float:  # fmt: skip
    """Observations in `family`'s series already counted at their first sample in the window
    (0 for a series scraped idle before the load): rate() misses them."""
    selector = f'{family}_count{{namespace="{namespace}",llmservice="{llmservice}"}}'
    return sum(fleet.prom.first_values(selector, window, at))


def splitting_boundary(buckets: tuple[float, ...], values: list[float]) -> float:
    """The bucket edge that splits the client's measurements most evenly (a non-trivial
    attainment, neither 0 nor 1)."""
    return min(buckets, key=lambda b: abs(sum(v <= b for v in values) / len(values) - 0.5))


@pytest.mark.parametrize(("engine", "name"), [("vllm", "chat"), ("sglang", "sg")])
def test_ttft_attainment_exact_at_a_boundary_and_rounded_down_between(
    fleet: Fleet, engine: str, name: str
) -> None:
    at, window = _after(fleet)
    buckets = engine_info(engine).metrics.ttft_buckets
    client = ttfts(fleet.of("team-a", name))
    edge = splitting_boundary(buckets, client)
    low, high = fraction_bounds(client, edge)
    exact = read(fleet, query(engine, "team-a", name, ttft=edge, tpot=0.1, window=window), at)
    assert exact.ttft.boundary.rounding == "exact" and exact.ttft.boundary.seconds == edge
    assert exact.ttft.family == f"{engine}:time_to_first_token_seconds"
    value = exact.signals.ttft_attainment
    tol = tolerance(len(client), unseen(fleet, exact.ttft.family, "team-a", name, window, at))
    assert value is not None and low - tol <= value <= high + tol, (edge, value, low, high)
    assert 0.0 < value < 1.0

    upper = buckets[buckets.index(edge) + 1]
    between = edge + (upper - edge) / 2
    rounded = read(fleet, query(engine, "team-a", name, ttft=between, tpot=0.1, window=window), at)
    assert rounded.ttft.boundary.rounding == "down" and rounded.ttft.boundary.seconds == edge
    assert rounded.signals.ttft_attainment == pytest.approx(value, abs=1e-9)
    # Safe: never more than the client saw under the real SLO.
    assert value <= sum(t <= between for t in client) / len(client) + tol


def test_ttft_quantile_lies_in_the_buckets_the_client_measured(fleet: Fleet) -> None:
    at, window = _after(fleet)
    obs = read(fleet, query("vllm", "team-a", "chat", ttft=0.5, tpot=0.1, window=window), at)
    buckets = engine_info("vllm").metrics.ttft_buckets
    client = sorted(ttfts(fleet.of("team-a", "chat")))
    # histogram_quantile interpolates inside the bucket holding the ceil(0.95 n)-th smallest
    # observation; the simulator's value of that rank lies between these two.
    rank = math.ceil(0.95 * len(client)) - 1
    high = client[rank]
    low = sorted(max(t - OVERHEAD_S * TIME_SCALE, 0.0) for t in client)[rank]
    p95 = obs.signals.ttft_quantile_seconds
    below = buckets[max(bisect.bisect_left(buckets, low) - 1, 0)]
    above = buckets[min(bisect.bisect_left(buckets, high), len(buckets) - 1)]
    assert p95 is not None and below <= p95 <= above, (low, high, p95)


def test_request_rate_reporting_replicas_and_scoping(fleet: Fleet) -> None:
    at, window = _after(fleet)
    for engine, namespace, name, pods in (
        ("vllm", "team-a", "chat", 2),
        ("vllm", "team-b", "chat", 1),
        ("sglang", "team-a", "sg", 1),
    ):
        obs = read(fleet, query(engine, namespace, name, ttft=0.5, tpot=0.1, window=window), at)
        sent = len(fleet.of(namespace, name))
        assert obs.signals.reporting_replicas == pods
        rate = obs.signals.request_rate
        # Every request finished inside the window, which the series cover end to end: the
        # rate times the window is the count, up to rate()'s extrapolation (~1 scrape).
        assert rate is not None and rate * window == pytest.approx(sent, rel=0.1), (name, rate)
        age = obs.signals.newest_sample_age_seconds
        assert age is not None and 0 <= age < 5.0  # scraped every second
        # The simulators export the engines' prefix-cache series but model no cache: the
        # observed hit rate is a measured 0 (vLLM: hits 0 over queries > 0; SGLang's gauge).
        assert obs.signals.prefix_cache_hit_rate == 0.0, name


@pytest.mark.parametrize(
    ("engine", "namespace", "name", "family", "per"),
    [
        ("vllm", "team-a", "chat", "vllm:request_time_per_output_token_seconds", "request"),
        # vLLM before 0.11: no per-request TPOT histogram, the ITL under its old name.
        ("vllm", "team-b", "chat", "vllm:time_per_output_token_seconds", "token"),
        ("sglang", "team-a", "sg", "sglang:request_time_per_output_token_seconds", "request"),
    ],
)
def test_tpot_attainment_and_goodput_bounds(
    fleet: Fleet, engine: str, namespace: str, name: str, family: str, per: str
) -> None:
    at, window = _after(fleet)
    outputs = fleet.of(namespace, name)
    per_request = tpots(outputs, engine)
    client_tpot = [t for t in per_request if t is not None]
    buckets = engine_info(engine).metrics.itl_buckets
    edge = splitting_boundary(buckets, client_tpot)
    ttft_slo = splitting_boundary(engine_info(engine).metrics.ttft_buckets, ttfts(outputs))
    obs = read(fleet, query(engine, namespace, name, ttft=ttft_slo, tpot=edge, window=window), at)
    assert (obs.tpot.family, obs.tpot.per, obs.tpot.boundary.rounding) == (family, per, "exact")
    b = obs.signals.tpot_attainment
    assert b is not None
    if per == "request":  # the same quantity the client computes per request
        low, high = fraction_bounds(client_tpot, edge)
        tol = tolerance(len(client_tpot), unseen(fleet, family, namespace, name, window, at))
        assert low - tol <= b <= high + tol, (edge, b, low, high)
    a, rate = obs.signals.ttft_attainment, obs.signals.request_rate
    assert a is not None and rate is not None
    assert obs.signals.goodput == pytest.approx(max(0.0, a + b - 1.0) * rate)
    assert obs.goodput_upper == pytest.approx(min(a, b) * rate)
    if per == "request":
        # The lower bound never exceeds what really met both SLOs (client: per request).
        slack = OVERHEAD_S * TIME_SCALE
        good = sum(
            t - slack <= ttft_slo and (p is None or p - slack <= edge)
            for t, p in zip(ttfts(outputs), per_request, strict=True)
        )
        assert obs.signals.goodput <= good / window + 0.05 * rate


def test_zero_load_reads_as_no_data_not_as_zero(fleet: Fleet) -> None:
    obs = read(
        fleet,
        query("vllm", "team-a", "chat", ttft=0.5, tpot=0.1, window=QUIET_S - 1),
        fleet.quiet_at,
    )
    s = obs.signals
    assert s.reporting_replicas == 2 and s.request_rate == 0.0
    assert s.ttft_quantile_seconds is None and s.ttft_attainment is None
    assert s.tpot_attainment is None and s.goodput is None
    assert s.running_per_replica == 0.0 and s.waiting_per_replica == 0.0
    assert s.prefix_cache_hit_rate is None  # no prompt in the window: 0/0, not a 0 hit rate


def test_nothing_for_an_llmservice_nobody_scrapes(fleet: Fleet) -> None:
    at, window = _after(fleet)
    obs = read(fleet, query("vllm", "team-c", "chat", ttft=0.5, tpot=0.1, window=window), at)
    assert obs.signals.reporting_replicas == 0
    assert obs.signals.request_rate is None and obs.signals.newest_sample_age_seconds is None
    assert obs.ttft.boundary.rounding == "nodata"


def test_running_and_waiting_per_replica_under_a_closed_loop(fleet: Fleet) -> None:
    chat = [p for p in fleet.pods if p.llmservice == "chat" and p.namespace == "team-a"]

    async def go() -> tuple[Observation, dict[str, float], list[float]]:
        # CONCURRENCY long requests per pod at once (about 9 s each at this time scale).
        runs = [
            asyncio.create_task(run_benchmark(_config(
                p, seed=9, num_prompts=CONCURRENCY, request_rate=math.inf,
                max_concurrency=CONCURRENCY,
                dataset=DatasetSpec(input_len=256, output_len=300, seed=9),
            )))
            for p in chat
        ]  # fmt: skip
        moment = time.time() + 3.0
        await asyncio.sleep(3.0)
        await asyncio.to_thread(fleet.prom.wait_scraped_after, moment, [p.target for p in chat])
        q = query("vllm", "team-a", "chat", ttft=0.5, tpot=0.1, window=10)
        async with PrometheusClient(fleet.prom.url) as client:
            at, looked = time.time(), time.perf_counter()
            obs = await read_signals(client, q, at)
            load = await pod_load(client, "vllm", "team-a", "chat", at)
        results = await asyncio.gather(*runs)
        # What the client had in flight per pod over the last scrape interval before the
        # reading (bench times are perf_counter seconds): the fewest at any of those moments.
        in_flight = []
        for outputs, _ in results:
            assert all(o.success for o in outputs)
            in_flight.append(min(
                sum(o.start_time <= t < o.start_time + o.latency for o in outputs)
                for t in (looked - 1.5 + 0.1 * i for i in range(16))
            ))  # fmt: skip
        return obs, load, in_flight

    obs, load, in_flight = asyncio.run(go())
    assert in_flight == [CONCURRENCY, CONCURRENCY]  # the reading fell inside the closed loop
    running, waiting = obs.signals.running_per_replica, obs.signals.waiting_per_replica
    assert running is not None and waiting is not None
    # Engine-side in flight = client-side in flight (HTTP gaps between requests are sub-ms).
    assert running + waiting == pytest.approx(CONCURRENCY, abs=0.5)
    assert obs.signals.kv_usage is not None and 0.0 < obs.signals.kv_usage <= 1.0
    assert set(load) == {"chat-0", "chat-1"}
    assert all(v == pytest.approx(CONCURRENCY, abs=1.0) for v in load.values())


# --- the client's error classes --------------------------------------------------------------


async def test_bad_promql_carries_the_servers_error_text(fleet: Fleet) -> None:
    async with PrometheusClient(fleet.prom.url, retries=0) as client:
        with pytest.raises(PromQLError) as caught:
            await client.query("sum(rate(vllm:request_success_total[1m])")
    assert caught.value.error_type == "bad_data"
    assert "parse error" in caught.value.server_message
    assert "parse error" in str(caught.value)


async def test_scalar_refuses_empty_nan_and_stale(fleet: Fleet) -> None:
    async with PrometheusClient(fleet.prom.url) as client:
        with pytest.raises(EmptyResult):
            await client.scalar('up{job="no-such-job"}')
        with pytest.raises(NonFiniteValue):
            await client.scalar("vector(0) / 0")
        assert await client.scalar("vector(1) + 1") == 2.0
        selector = 'vllm:num_requests_running{namespace="team-a",pod="chat-0"}'
        now = time.time()
        assert await client.scalar(selector, now, max_age=10) >= 0
        # Evaluated 2 minutes later, the last sample is still in the 5 min lookback: stale.
        with pytest.raises(StaleSample):
            await client.scalar(selector, now + 120, max_age=60)


async def test_range_query_returns_the_series_over_the_load(fleet: Fleet) -> None:
    async with PrometheusClient(fleet.prom.url) as client:
        result = await client.query_range(
            'sum by (pod) (vllm:request_success_total{namespace="team-a",llmservice="chat"})',
            fleet.started, fleet.ended + 2, 1.0,
        )  # fmt: skip
    by_pod = {s.labels["pod"]: s.points for s in result.series}
    assert set(by_pod) == {"chat-0", "chat-1"}
    for pod, points in by_pod.items():
        assert points[-1][1] == len(fleet.outputs[pod])
        assert [v for _, v in points] == sorted(v for _, v in points)  # a counter


async def test_stopped_prometheus_is_unreachable(tmp_path: Path) -> None:
    with running_prometheus(tmp_path / "p") as prom:
        client = PrometheusClient(prom.url, retries=1, backoff=0.01)
        assert await client.scalar("vector(3)") == 3.0
    try:
        with pytest.raises(PrometheusUnreachable, match="did not answer"):
            await client.query("vector(3)")
    finally:
        await client.close()
