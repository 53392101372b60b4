"""The endpoint picker's routing in the fleet simulator, and the queue behind a long
prefill that it routes around (the replica model schedules a waiting request only while
the step's token budget lasts, as vLLM's V1 scheduler)."""

from __future__ import annotations

import pytest

from tokenfleet.autoscale.fleetsim.fleet import Fleet, ReplicaShape
from tokenfleet.autoscale.fleetsim.replica import FastReplica, FleetRequest
from tokenfleet.autoscale.fleetsim.run import SimOptions, prepare
from tokenfleet.autoscale.fleetsim.traces import Trace, TraceRequest

pytestmark = pytest.mark.slow  # a whole-trace replay: the unit-slow tier


@pytest.fixture(scope="module")
def shape() -> ReplicaShape:
    trace = Trace("one", (TraceRequest(0.0, 800, 100),), 60.0)
    return prepare(trace, SimOptions()).shape  # Llama-3.1-8B on L40S: 2,048-token steps


def test_a_request_behind_a_long_prefill_waits_in_the_queue(shape: ReplicaShape) -> None:
    replica = FastReplica(shape.config, shape.timer)
    long = FleetRequest(0.0, 7000, 2)
    replica.add(long)
    replica.advance(0.001)  # the long prompt's first chunk takes the whole budget
    short = FleetRequest(0.002, 200, 2)
    replica.add(short)
    replica.advance(0.01)
    assert len(replica.waiting) == 1  # no budget left for it: it waits, and says so
    replica.drain()
    assert long.first_token_at is not None and short.scheduled_at is not None
    # It is scheduled in the step that finishes the long prompt, and its wait is counted.
    assert short.queue_wait > 0.3
    assert short.scheduled_at < long.first_token_at


def test_the_picker_routes_around_a_replica_busy_with_a_long_prefill(
    shape: ReplicaShape,
) -> None:
    fleet = Fleet(shape, 0.0, routing="picker")
    fleet.start(2, 0.0, warm=True)
    long = FleetRequest(0.0, 7000, 2)
    fleet.route(long, 0.0)
    busy = long.replica
    fleet.advance(0.01)
    behind = FleetRequest(0.01, 200, 2)
    # Both queues are empty and the busy replica holds more KV: the other one wins.
    fleet.route(behind, 0.01)
    assert behind.replica != busy
    # Load-blind round robin puts every other request behind the long prompt.
    robin = Fleet(shape, 0.0, routing="round-robin")
    robin.start(2, 0.0, warm=True)
    first = FleetRequest(0.0, 7000, 2)
    robin.route(first, 0.0)
    robin.advance(0.01)
    robin.route(FleetRequest(0.01, 200, 2), 0.01)
    second = FleetRequest(0.02, 200, 2)
    robin.route(second, 0.02)
    assert second.replica == first.replica
