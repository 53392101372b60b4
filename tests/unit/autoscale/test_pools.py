"""The prefill pool's rules (autoscale/pools.py), table-tested."""

from __future__ import annotations

import pytest

from tokenfleet.autoscale.pools import PrefillInputs, prefill_replicas


def inputs(**kw: object) -> PrefillInputs:
    base: dict[str, object] = {
        "current": 4, "decode": 1, "request_rate": 20.0, "queue_wait_seconds": 0.1,
        "goodput_per_replica": 5.0, "queue_wait_budget_seconds": 0.5, "band": (3.0, 15.0),
    }  # fmt: skip
    base.update(kw)
    return PrefillInputs(**base)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("kw", "replicas", "said"),
    [
        ({}, 4, "needs 4"),  # the feed-forward, the queue inside its budget
        ({"request_rate": 30.0}, 6, "needs 6"),
        # the fixable part of TTFT above its budget: one more than the feed-forward at least
        ({"queue_wait_seconds": 0.8}, 5, "one more"),
        ({"request_rate": 10.0, "queue_wait_seconds": 0.05}, 3, "one fewer"),
        # down only when the queue shows room
        ({"request_rate": 10.0, "queue_wait_seconds": 0.4}, 4, "held"),
        # the band keeps the pools in proportion: 3..15 per decode replica
        ({"request_rate": 2.0, "queue_wait_seconds": 0.0, "current": 3}, 3, "low end"),
        ({"request_rate": 200.0, "decode": 1}, 15, "high end"),
        ({"decode": 0}, 0, "scales to zero with it"),
        ({"current": 0, "decode": 1, "request_rate": None}, 3, "held"),
    ],
)
def test_prefill_pool(kw: dict[str, object], replicas: int, said: str) -> None:
    d = prefill_replicas(inputs(**kw))
    assert d.replicas == replicas and said in d.reason, d
