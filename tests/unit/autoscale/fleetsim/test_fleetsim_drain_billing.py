"""A replica told to drain holds its GPU until then: an idle replica removed at t is billed
to t, not to its last request (which under-billed every scaling policy against the static
fleet on traces with idle gaps, e.g. Azure "code")."""

from __future__ import annotations

import pytest

from tokenfleet.autoscale.fleetsim.fleet import Fleet, ReplicaShape
from tokenfleet.autoscale.fleetsim.replica import FleetRequest
from tokenfleet.capacity import PlanRequest, get_gpu, load_model, plan, step_model
from tokenfleet.scheduling.core import SchedulerConfig


@pytest.fixture(scope="module")
def shape() -> ReplicaShape:
    p = plan(
        PlanRequest(
            arch=load_model("meta-llama/Llama-3.1-8B"), gpu=get_gpu("l40s"), max_model_len=8192
        )
    )
    config = SchedulerConfig(
        p.kv_cache_tokens, p.max_num_seqs, p.max_num_batched_tokens, p.max_model_len
    )
    return ReplicaShape(config, step_model(p), p.gpus_per_replica)


@pytest.mark.parametrize("retire_by", ["advance", "finish"])
def test_an_idle_replica_is_billed_until_it_is_drained(shape: ReplicaShape, retire_by: str) -> None:
    fleet = Fleet(shape, cold_start=0.0)
    fleet.start(2, 0.0, warm=True)
    for replica in fleet.replicas:  # one short request each, done within seconds
        replica.model.add(FleetRequest(1.0, 100, 10))
    fleet.advance(500.0)
    fleet.scale_to(1, 500.0)  # idle for minutes, then drained
    if retire_by == "advance":
        fleet.advance(515.0)
        assert len(fleet.retired) == 1
    fleet.finish(600.0)
    # 600 s for the one kept, 500 s for the drained one: not 600 s + its last finish (~1 s).
    assert fleet.gpu_hours() == pytest.approx((600.0 + 500.0) * shape.gpus / 3600.0)


def test_a_busy_replica_is_billed_until_its_last_request_finishes(shape: ReplicaShape) -> None:
    fleet = Fleet(shape, cold_start=0.0)
    fleet.start(1, 0.0, warm=True)
    fleet.replicas[0].model.add(FleetRequest(0.0, 1000, 2000))  # minutes of decode
    fleet.scale_to(0, 1.0)
    fleet.advance(1000.0)
    (replica,) = fleet.retired
    assert replica.stopped_at is not None and replica.stopped_at > 10.0
    assert replica.stopped_at == replica.model.last_finish
