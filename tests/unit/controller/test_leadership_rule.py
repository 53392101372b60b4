"""controller/leadership.py applies kopf's pause rule (kopf 1.45, peering.py
process_peering_event): paused while a live peer other than itself has a priority >= its own."""

from __future__ import annotations

import datetime
from typing import Any

import pytest

from tokenfleet.controller.leadership import blocking_peers

NOW = datetime.datetime(2026, 1, 1, 12, 0, 0, tzinfo=datetime.UTC)


def seen(seconds_ago: float) -> str:
    return (NOW - datetime.timedelta(seconds=seconds_ago)).isoformat()


@pytest.mark.parametrize(
    ("peers", "blocked_by"),
    [
        ({}, []),
        ({"me": {"priority": 5, "lifetime": 60, "lastseen": seen(0)}}, []),  # itself
        ({"b": {"priority": 9, "lifetime": 60, "lastseen": seen(10)}}, ["b"]),  # higher
        ({"b": {"priority": 5, "lifetime": 60, "lastseen": seen(10)}}, ["b"]),  # equal: both
        ({"b": {"priority": 1, "lifetime": 60, "lastseen": seen(10)}}, []),  # lower
        ({"b": {"priority": 9, "lifetime": 60, "lastseen": seen(61)}}, []),  # expired
        ({"b": {"priority": 9, "lifetime": 0, "lastseen": seen(0)}}, []),  # left (lifetime 0)
        ({"b": {"priority": 9}}, ["b"]),  # no lastseen: seen now, as kopf reads it
        ({"b": {"priority": "x"}, "c": "junk"}, []),  # malformed entries are skipped
        ({"b": {"priority": 9, "lastseen": "2026-01-01T11:59:50Z"}}, ["b"]),  # Z suffix
    ],
)
def test_blocking_peers(peers: dict[str, Any], blocked_by: list[str]) -> None:
    assert blocking_peers(peers, "me", 5, NOW) == blocked_by
