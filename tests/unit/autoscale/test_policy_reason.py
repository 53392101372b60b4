"""The decision says what it read: the TTFT quantile against the SLO, or, with the traffic's
ceiling, the queue wait against its budget (never labelled TTFT); and the arrivals when they
exceed what the fleet finishes."""

from __future__ import annotations

from tests.support.policy_helpers import first_history, fleet, signals, spec
from tokenfleet.autoscale.attainability import Ceiling
from tokenfleet.autoscale.policy import decide
from tokenfleet.autoscale.types import History

NOW = 1000.0


def test_the_reason_says_ttft_without_a_ceiling() -> None:
    d = decide(spec(), fleet(2), signals(NOW, 2, 10.0, 0.45, 1.0), first_history(), NOW)
    assert "TTFT 450 ms (0.90x SLO)" in d.reason and "queue wait" not in d.reason


def test_the_reason_names_the_queue_wait_when_that_is_what_it_reads() -> None:
    """With the traffic's ceiling, the policy compares the queue wait with its budget (the
    SLO less the mix's prefill): the reason must not call that figure the TTFT."""
    ceiling = Ceiling(
        attainable=1.0,
        longest_prompt=8000,
        target=0.99,
        fixable_target=0.99,
        wait_budget_seconds=0.4,
        slo_attainment=0.99,
        ttft_ms=500.0,
    )
    sig = signals(NOW, 2, 10.0, 2.5, 1.0, queue_wait_quantile_seconds=0.2)
    d = decide(spec(), fleet(2), sig, first_history(), NOW, ceiling=ceiling)
    assert "queue wait 200 ms (0.50x its 400 ms budget)" in d.reason, d.reason
    assert "TTFT" not in d.reason


def test_the_reason_shows_arrivals_beyond_the_finish_rate() -> None:
    h = History(capacity=first_history().capacity, last_in_flight=(NOW - 15, 40.0))
    sig = signals(NOW, 2, 20.0, 0.3, 1.0, running_per_replica=20.0, waiting_per_replica=75.0)
    d = decide(spec(), fleet(2), sig, h, NOW)
    assert d.reason.startswith("30 req/s arriving (20 finished) on 2 ready"), d.reason
