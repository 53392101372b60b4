"""The fast replica model against the simulator's step-by-step scheduler on the same arrivals
and the same step model: it must make the same decisions, not a look-alike."""

from __future__ import annotations

import random
import statistics
from dataclasses import replace

import pytest

from tests.support.scheduler_runs import fast_replica_run
from tokenfleet.autoscale.fleetsim.replica import FastReplica, FleetRequest
from tokenfleet.capacity import PlanRequest, get_gpu, load_model, plan, step_model
from tokenfleet.scheduling.core import Arrival, SchedulerConfig, simulate


@pytest.fixture(scope="module")
def replica() -> tuple[SchedulerConfig, object]:
    p = plan(
        PlanRequest(
            arch=load_model("meta-llama/Llama-3.1-8B"), gpu=get_gpu("l40s"), max_model_len=8192
        )
    )
    config = SchedulerConfig(
        p.kv_cache_tokens, p.max_num_seqs, p.max_num_batched_tokens, p.max_model_len
    )
    return config, step_model(p)


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
    """Past saturation the models differ in one known way (KV reserved at admission, so no
    preemption): medians still within 15%."""
    config, timer = replica
    exact, mine = _both(config, timer, _arrivals(12.0, 120))
    e_ttft = statistics.median(r.first_token_at - r.arrival for r in exact)
    m_ttft = statistics.median(r.ttft for r in mine)
    assert e_ttft > 1.0  # really overloaded
    assert m_ttft == pytest.approx(e_ttft, rel=0.15)
    e_end = max(r.finished_at for r in exact)
    assert max(r.finished_at for r in mine if r.finished_at) == pytest.approx(e_end, rel=0.15)


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
