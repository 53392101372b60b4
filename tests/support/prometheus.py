"""A REAL Prometheus server for system tests (Debian package `prometheus`).

`running_prometheus(workdir)` starts /usr/bin/prometheus on a free loopback port with a
temporary config and TSDB, a 1 s scrape interval, and file-based service discovery, so
tests add scrape targets after it is up (`prom.set_targets(...)`) without a restart.
`prom.query(...)` runs instant PromQL through the HTTP API (httpx). Use the `prometheus`
session fixture, or the context manager for a private server in a module fixture:

    from tests.support.prometheus import Prometheus, running_prometheus

    @pytest.fixture(scope="module")
    def prom(tmp_path_factory):
        with running_prometheus(tmp_path_factory.mktemp("prom")) as server:
            yield server

The server itself (config, process, readiness, target file) is the package's
`tokenfleet.localfleet.prometheus.LocalPrometheus`, the one `tokenfleet demo` runs; this
module adds what tests need on top: waiting for scrapes, and query errors as assertions.
"""

from __future__ import annotations

import contextlib
import math
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from tokenfleet.localfleet.prometheus import (
    LocalPrometheus,
    free_port,
    instant_samples,
    prometheus_binary,
    write_target_groups,
)

__all__ = [
    "SCRAPE_INTERVAL_S",
    "Prometheus",
    "Sample",
    "free_port",
    "prometheus",
    "prometheus_binary",
    "running_prometheus",
]

SCRAPE_INTERVAL_S = 1.0
JOB = "tokenfleet"  # the scrape job's name, as queries such as up{job="tokenfleet"} expect


@dataclass
class Sample:
    labels: dict[str, str]
    value: float


class Prometheus:
    """A started server: its URL, the scrape-target file and query helpers."""

    def __init__(self, url: str, targets_file: Path, process: subprocess.Popen[bytes]) -> None:
        self.url = url
        self.targets_file = targets_file
        self.process = process
        self.http = httpx.Client(base_url=url, timeout=30.0, trust_env=False)

    # --- targets -------------------------------------------------------------------------
    def set_targets(self, targets: list[str], labels: dict[str, str] | None = None) -> None:
        """Replace the scraped targets ("host:port"); Prometheus notices the file change."""
        self.set_target_groups([(targets, labels or {})])

    def set_target_groups(self, groups: list[tuple[list[str], dict[str, str]]]) -> None:
        """Several file_sd groups, each with its own target labels, e.g. one group per
        simulated pod with the labels a PodMonitor would add (llmservice, namespace, pod)."""
        payload = [{"targets": t, "labels": labels} for t, labels in groups if t]
        write_target_groups(self.targets_file, payload)

    def active_targets(self) -> list[dict[str, Any]]:
        data = self._get("/api/v1/targets", {"state": "active"})
        return list(data["activeTargets"])

    def wait_targets_up(self, targets: list[str], timeout_s: float = 30.0) -> None:
        """Until every target ("host:port") has been scraped successfully at least once."""
        deadline = time.monotonic() + timeout_s
        health: dict[str, str] = {}
        while time.monotonic() < deadline:
            health = {t["labels"].get("instance", ""): t["health"] for t in self.active_targets()}
            if all(health.get(t) == "up" for t in targets):
                return
            time.sleep(0.2)
        raise TimeoutError(f"Prometheus at {self.url}: targets {targets} not up: {health}")

    def wait_scraped_after(
        self, moment: float, targets: list[str], timeout_s: float = 30.0
    ) -> None:
        """Until every target has a scrape that started after `moment` (unix seconds), so
        counters include everything that happened before it."""
        deadline = time.monotonic() + timeout_s
        last: dict[str, float] = {}
        while time.monotonic() < deadline:
            last = {
                s.labels.get("instance", ""): s.value
                for s in self.query(f'timestamp(up{{job="{JOB}"}})')
            }
            if all(last.get(t, 0.0) > moment for t in targets):
                return
            time.sleep(0.2)
        raise TimeoutError(f"Prometheus at {self.url}: no scrape after {moment} for {last}")

    # --- queries -------------------------------------------------------------------------
    def query(self, promql: str, at: float | None = None) -> list[Sample]:
        """Instant query -> samples (vector or scalar results), evaluated at `at` if given."""
        params: dict[str, str] = {"query": promql}
        if at is not None:
            params["time"] = f"{at:.3f}"
        return [
            Sample(labels, value)
            for labels, value in instant_samples(self._get("/api/v1/query", params))
        ]

    def first_values(self, selector: str, window_s: float, at: float) -> list[float]:
        """The first sample of each series `selector` matches in the `window_s` before `at`."""
        params = {"query": f"{selector}[{math.ceil(window_s)}s]", "time": f"{at:.3f}"}
        data = self._get("/api/v1/query", params)
        return [float(series["values"][0][1]) for series in data["result"] if series["values"]]

    def scalar(self, promql: str, at: float | None = None) -> float:
        """The single value of a query that must return exactly one sample."""
        samples = self.query(promql, at)
        if len(samples) != 1:
            raise AssertionError(f"PromQL {promql!r} returned {len(samples)} samples: {samples}")
        return samples[0].value

    def _get(self, path: str, params: dict[str, str]) -> dict[str, Any]:
        # A bad query is the test's failure, told as an assertion naming the query.
        resp = self.http.get(path, params=params)
        body = resp.json()
        if resp.status_code != 200 or body.get("status") != "success":
            raise AssertionError(f"Prometheus {path} {params}: HTTP {resp.status_code} {body}")
        return dict(body["data"])

    def close(self) -> None:
        self.http.close()


@contextlib.contextmanager
def running_prometheus(
    workdir: Path, scrape_interval_s: float = SCRAPE_INTERVAL_S, flags: tuple[str, ...] = ()
) -> Iterator[Prometheus]:
    """Start Prometheus in `workdir` (config, targets file, TSDB, log), stop it afterwards;
    `flags` are added to its command line."""
    server = LocalPrometheus(workdir, scrape_interval_s, job=JOB, flags=flags)
    try:
        server.start()
        assert server.process is not None
        prom = Prometheus(server.url, server.targets_file, server.process)
        try:
            yield prom
        finally:
            prom.close()
    finally:
        server.close()


@pytest.fixture(scope="session")
def prometheus(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Prometheus]:
    """One real Prometheus for the session; tests set their own targets."""
    try:
        prometheus_binary()
    except RuntimeError as error:  # a missing binary is a setup error, not a reason to skip
        pytest.fail(str(error))
    with running_prometheus(tmp_path_factory.mktemp("prometheus")) as server:
        yield server
