"""Fixtures the unit tests share."""

from __future__ import annotations

import socket
from collections.abc import Iterator

import pytest


@pytest.fixture
def busy_port() -> Iterator[int]:
    """A loopback port held open (listening) for the test's length."""
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        yield held.getsockname()[1]
