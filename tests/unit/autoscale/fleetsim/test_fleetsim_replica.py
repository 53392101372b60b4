"""The fast replica model against the simulator's step-by-step scheduler on the same arrivals,
the same step model and the engine version's admission rules: it must make the same
decisions, not a look-alike, beyond the KV cache too."""

from __future__ import annotations

import random
import statistics
from dataclasses import replace

import pytest

from tests.support.scheduler_runs import fast_replica_run
from tokenfleet.autoscale.fleetsim.replica import FastReplica, FleetRequest
from tokenfleet.capacity import PlanRequest, get_gpu, load_model, plan, step_model
from tokenfleet.capacity.load import Replica
from tokenfleet.scheduling.core import Arrival, SchedulerConfig, StepTimer, simulate


@pytest.fixture(scope="module")
def replica() -> tuple[SchedulerConfig, object]:
    p = plan(
        PlanRequest(
            arch=load_model("meta-llama/Llama-3.1-8B"), gpu=get_gpu("l40s"), max_model_len=8192
        )
    )
    return Replica.for_plan(p).scheduler_config(), step_model(p)


def _arrivals(rate: float, seconds: float, seed: int = 1) -> list[Arrival]:
    rng = random.Random(seed)
    t, out = 0.0, []
    while True:
        t += rng.expovariate(rate)
        if t >= seconds:
            return out
        out.append(
            Arrival(
                t,
                min(4096, int(rng.lognormvariate(6.9, 0.6)) + 16),
                min(1024, int(rng.lognormvariate(4.8, 0.7)) + 2),
            )
        )


def _both(
    config: SchedulerConfig, timer: object, arrivals: list[Arrival]
) -> tuple[list, list[FleetRequest]]:
    exact = simulate(config, timer, arrivals)  # type: ignore[arg-type]
    return exact, fast_replica_run(config, timer, arrivals)  # type: ignore[arg-type]


@pytest.mark.parametrize("rate", [0.5, 2.0])
def test_below_saturation_every_request_matches_the_scheduler(replica, rate: float) -> None:
    config, timer = replica
    exact, mine = _both(config, timer, _arrivals(rate, 300))
    for e, m in zip(exact, mine, strict=True):
        assert m.first_token_at == pytest.approx(e.first_token_at, rel=0.02, abs=0.005)
        assert m.finished_at == pytest.approx(e.finished_at, rel=0.02, abs=0.02)


@pytest.mark.parametrize("threshold", [256, 1024])
def test_with_a_long_prefill_threshold_every_request_matches_the_scheduler(
    replica, threshold: int
) -> None:
    """vLLM's --long-prefill-token-threshold (chunks capped while others are in): the same
    first tokens and finishes as the step-by-step scheduler, long prompts included."""
    config, timer = replica
    config = replace(config, long_prefill_token_threshold=threshold)
    arrivals = _arrivals(2.0, 300, seed=3)
    arrivals += [Arrival(a.at + 0.05, 6000, 4) for a in arrivals[::25]]  # long prompts
    exact, mine = _both(config, timer, sorted(arrivals, key=lambda a: a.at))
    for e, m in zip(exact, mine, strict=True):
        assert m.first_token_at == pytest.approx(e.first_token_at, rel=0.02, abs=0.005)
        assert m.finished_at == pytest.approx(e.finished_at, rel=0.02, abs=0.02)


def test_overloaded_latencies_stay_close(replica) -> None:
    """Past saturation (a queue, the KV cache full): medians within 2%."""
    config, timer = replica
    exact, mine = _both(config, timer, _arrivals(12.0, 120))
    e_ttft = statistics.median(r.first_token_at - r.arrival for r in exact)
    m_ttft = statistics.median(r.ttft for r in mine)
    assert e_ttft > 1.0  # really overloaded
    assert m_ttft == pytest.approx(e_ttft, rel=0.02)
    e_end = max(r.finished_at for r in exact)
    assert max(r.finished_at for r in mine if r.finished_at) == pytest.approx(e_end, rel=0.02)


PROMPT, OUTPUT = 4096, 512


@pytest.fixture(scope="module")
def qwen() -> dict[str, tuple[SchedulerConfig, StepTimer]]:
    """The issue's case per engine version: Qwen3-32B on one 80 GB GPU, a KV cache of a
    few 4K-token requests, each replica scheduling as its engine version does."""
    out = {}
    for engine, version in (("vllm", "0.11.0"), ("vllm", "0.32.0"), ("sglang", None)):
        p = plan(
            PlanRequest(
                arch=load_model("Qwen/Qwen3-32B"),
                gpu=get_gpu("a100-80gb"),
                engine=engine,
                engine_version=version,
                tensor_parallel_size=1,
                input_tokens=PROMPT,
                output_tokens=OUTPUT,
            )
        )
        out[f"{engine} {version}"] = (Replica.for_plan(p).scheduler_config(), step_model(p))
    return out


@pytest.mark.parametrize("name", ["vllm 0.11.0", "vllm 0.32.0", "sglang None"])
def test_beyond_the_kv_cache_it_admits_preempts_and_queues_as_the_scheduler(qwen, name) -> None:
    """Four times what the KV cache holds at once: the engine version's admission (first
    chunk, whole sequence, SGLang's output reservation), preemption and a preempted
    request's own prefix-cache hit, request for request as the scheduler; the throughput
    holds (no collapse), the rest queues."""
    config, timer = qwen[name]
    held = min(config.max_num_seqs, config.kv_cache_tokens // (PROMPT + OUTPUT))
    rates = []
    for n in (held, 4 * held):
        arrivals = [Arrival(0.0, PROMPT, OUTPUT)] * n
        exact, mine = _both(config, timer, arrivals)
        for e, m in zip(exact, mine, strict=True):
            assert m.first_token_at == pytest.approx(e.first_token_at, rel=0.02)
            assert m.finished_at == pytest.approx(e.finished_at, rel=0.02)
        assert sum(r.preemptions for r in mine) == pytest.approx(
            sum(r.num_preemptions for r in exact), abs=2
        )
        rates.append(n * OUTPUT / max(m.finished_at for m in mine))
    assert rates[1] >= 0.95 * rates[0]
    assert max(m.queue_wait for m in mine) > 0


def test_without_the_rules_it_thrashes_as_the_scheduler_does(qwen) -> None:
    """vLLM with its prefix cache off and first-chunk admission thrashes beyond the KV cache
    (the harness drives it so); the fast replica reproduces that, so the rules above are
    what hold its throughput."""
    config, timer = qwen["vllm 0.11.0"]
    bare = replace(config, prefix_caching=False)
    held = bare.kv_cache_tokens // (PROMPT + OUTPUT)
    exact, mine = _both(bare, timer, [Arrival(0.0, PROMPT, OUTPUT)] * (4 * held))
    preempted = sum(r.preemptions for r in mine)
    assert preempted > 10 * held
    assert preempted == pytest.approx(sum(r.num_preemptions for r in exact), rel=0.02)
    end = max(m.finished_at for m in mine)
    assert end == pytest.approx(max(e.finished_at for e in exact), rel=0.02)
    _, ruled = _both(config, timer, [Arrival(0.0, PROMPT, OUTPUT)] * (4 * held))
    assert max(m.finished_at for m in ruled) < 0.6 * end


def test_drain_finishes_everything_and_reports_the_last_finish(replica) -> None:
    config, timer = replica
    fast = FastReplica(config, timer)  # type: ignore[arg-type]
    requests = [FleetRequest(0.0, 512, 64), FleetRequest(0.1, 100, 1)]
    for r in requests:
        fast.add(r)
    end = fast.drain()
    assert fast.idle and all(r.finished_at is not None for r in requests)
    assert end == max(r.finished_at for r in requests if r.finished_at)
    assert requests[1].tpot == 0.0  # one output token: no TPOT
