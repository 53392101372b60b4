"""autoscale/type_capacity.py: a fleet over two GPU types counts each type's capacity."""

from __future__ import annotations

import pytest

from tokenfleet.autoscale.type_capacity import (
    TypeCapacity,
    from_status,
    per_replica,
    replicas_for,
)

# 2 H100 replicas at 20 req/s, 1 L40S replica at 3 req/s: 43 req/s.
FLEET = [TypeCapacity("h100-sxm", 2, 20.0), TypeCapacity("l40s", 1, 3.0)]
BOUNDS = (1, 50)


def test_the_mean_times_the_replicas_is_what_the_fleet_serves() -> None:
    assert per_replica(FLEET) * 3 == pytest.approx(43.0)


@pytest.mark.parametrize(
    ("decided", "growth", "expected"),
    [
        # The policy wants one more replica of 14.33 req/s; on L40S that is 5 replicas.
        (4, "l40s", 3 + 5),
        (4, "h100-sxm", 3 + 1),
        (3, "l40s", 3),
        (60, "l40s", 50),  # clipped to maxReplicas
    ],
)
def test_added_replicas_are_counted_in_the_growth_types_capacity(
    decided: int, growth: str, expected: int
) -> None:
    assert replicas_for(decided, 3, FLEET, growth, BOUNDS) == expected


def test_removal_takes_the_least_preferred_type_and_releases_no_more_than_asked() -> None:
    # One replica of 14.33 released: the L40S one (3) goes, an H100 (20) would be too much.
    assert replicas_for(2, 3, FLEET, "l40s", BOUNDS) == 2
    # Two replicas (28.7 req/s): the L40S and one H100 (23).
    assert replicas_for(1, 3, FLEET, "l40s", BOUNDS) == 1
    lean = [TypeCapacity("h100-sxm", 1, 20.0), TypeCapacity("l40s", 1, 3.0)]
    # 11.5 req/s to release: the L40S (3) goes, the H100 stays.
    assert replicas_for(1, 2, lean, "l40s", BOUNDS) == 1


def test_status_with_one_type_is_left_to_the_plain_policy() -> None:
    status = {
        "gpu": {
            "candidates": [{"type": "h100-sxm", "goodputPerReplica": 20.0},
                           {"type": "l40s", "goodputPerReplica": 3.0}],
            "placement": [{"type": "h100-sxm", "replicas": 3}, {"type": "l40s", "replicas": 0}],
            "growth": "h100-sxm",
        }
    }  # fmt: skip
    assert from_status(status) is None
    status["gpu"]["placement"][1]["replicas"] = 1
    types, growth = from_status(status) or ([], None)
    assert types == [TypeCapacity("h100-sxm", 3, 20.0), TypeCapacity("l40s", 1, 3.0)]
    assert growth == "h100-sxm"
