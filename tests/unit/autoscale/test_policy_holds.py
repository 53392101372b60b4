"""The holds that would keep a broken SLO broken act on what the data still proves:
- ReplicasStarting: while the SLO is broken, replicas that serve the arrivals at full
  utilisation but cannot drain the queue they built within a cold start are not enough;
- PartialData: a breach or a load on the replicas that report scales up; nothing else acts."""

from __future__ import annotations

from dataclasses import replace

from tests.support.policy_helpers import first_history, fleet, signals, spec
from tokenfleet.autoscale.policy import decide
from tokenfleet.autoscale.types import Signals

NOW = 1000.0


def _breaking(waiting: float, rate: float = 18.0) -> Signals:
    return signals(NOW, 1, rate, 3.0, 0.5, running_per_replica=10.0, waiting_per_replica=waiting)


def test_starting_replicas_that_cannot_drain_the_queue_do_not_hold_the_step() -> None:
    """1 ready + 1 starting (capacity 10 req/s each), 18 req/s arriving (the feed-forward at
    80% wants 3), the SLO broken and 400 requests queued: the 2 asked for serve the arrivals
    at full utilisation, but not 18 + 400 / 120 req/s, which drains the queue within a cold
    start: a third is ordered now, not after the second is ready."""
    d = decide(spec(), fleet(2, ready=1), _breaking(400.0), first_history(), NOW)
    assert (d.held, d.desired) == (None, 3), d.reason
    assert "would not drain the queue" in d.reason


def test_starting_replicas_that_drain_the_queue_still_hold() -> None:
    """The same breach with 20 requests queued: the 2 asked for drain them: wait for them."""
    d = decide(spec(), fleet(2, ready=1), _breaking(20.0), first_history(), NOW)
    assert (d.desired, d.held) == (2, "ReplicasStarting"), d.reason


def test_partial_data_with_a_breach_scales_up_on_the_reporting_replicas() -> None:
    """4 ready, 3 report (a new replica's first scrape is due): the 3 are overloaded (TTFT
    5x, 60 req/s on 10 req/s replicas). The missing report cannot make that smaller."""
    sig = signals(NOW, 3, 60.0, 5.0, 0.2, running_per_replica=20.0, waiting_per_replica=30.0)
    d = decide(spec(), fleet(4), sig, first_history(), NOW)
    assert d.desired > 4 and d.held is None
    assert d.reason.startswith("PartialData: 3 of 4 ready replicas report")
    # Nothing is learnt from a partial window, and a scale-down waits a whole window.
    assert d.history.capacity == first_history().capacity
    assert d.history.trusted_since is None


def test_partial_data_never_scales_down() -> None:
    sig = signals(NOW, 3, 1.0, 0.1, 1.0, running_per_replica=1.0, waiting_per_replica=0.0)
    h = replace(first_history(), trusted_since=NOW - 3600)
    d = decide(spec(scaleDownStabilizationSeconds=0), fleet(8), sig, h, NOW)
    assert (d.desired, d.held) == (8, "PartialData")
