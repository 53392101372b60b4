"""The Prometheus fixture itself: a real server starts, scrapes what it is given, answers."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.prometheus import Prometheus, running_prometheus

pytestmark = pytest.mark.system


@pytest.fixture(scope="module")
def prom(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Prometheus]:
    with running_prometheus(tmp_path_factory.mktemp("prom")) as server:
        yield server


def test_scrapes_targets_added_after_start(prom: Prometheus) -> None:
    itself = prom.url.removeprefix("http://")
    prom.set_targets([itself], {"role": "self"})
    prom.wait_targets_up([itself])
    moment = time.time()
    prom.wait_scraped_after(moment, [itself])
    assert prom.scalar(f'up{{instance="{itself}"}}') == 1.0
    build = prom.query("prometheus_build_info")
    assert build and build[0].labels["role"] == "self"
    assert prom.scalar("scalar(vector(2) + 1)") == 3.0


def test_bad_promql_names_the_query(prom: Prometheus) -> None:
    with pytest.raises(AssertionError, match="rate\\(oops"):
        prom.query("rate(oops[")


def test_stops_its_process(tmp_path: Path) -> None:
    with running_prometheus(tmp_path / "p") as server:
        process = server.process
        assert process.poll() is None
    assert process.poll() is not None
