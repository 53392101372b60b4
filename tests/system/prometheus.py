"""A REAL Prometheus server for system tests (Debian package `prometheus`).

`running_prometheus(workdir)` starts /usr/bin/prometheus on a free loopback port with a
temporary config and TSDB, a 1 s scrape interval, and file-based service discovery, so
tests add scrape targets after it is up (`prom.set_targets(...)`) without a restart.
`prom.query(...)` runs instant PromQL through the HTTP API (httpx). Use the `prometheus`
session fixture, or the context manager for a private server in a module fixture:

    from prometheus import Prometheus, running_prometheus

    @pytest.fixture(scope="module")
    def prom(tmp_path_factory):
        with running_prometheus(tmp_path_factory.mktemp("prom")) as server:
            yield server
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

SCRAPE_INTERVAL_S = 1.0
START_TIMEOUT_S = 60.0


def prometheus_binary() -> str:
    """The prometheus executable; a missing one is a setup error, not a reason to skip."""
    found = os.environ.get("TOKENFLEET_PROMETHEUS") or shutil.which("prometheus")
    if not found:
        raise FileNotFoundError(
            "prometheus binary not found on PATH (Debian package `prometheus`): "
            "run `make prometheus`, or set TOKENFLEET_PROMETHEUS=/path/to/prometheus"
        )
    return found


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


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
        groups = [{"targets": targets, "labels": labels or {}}] if targets else []
        tmp = self.targets_file.with_suffix(".tmp")
        tmp.write_text(json.dumps(groups))
        tmp.replace(self.targets_file)  # atomic: Prometheus never reads half a file

    def set_target_groups(self, groups: list[tuple[list[str], dict[str, str]]]) -> None:
        """Several file_sd groups, each with its own target labels, e.g. one group per
        simulated pod with the labels a PodMonitor would add (llmservice, namespace, pod)."""
        payload = [{"targets": t, "labels": labels} for t, labels in groups if t]
        tmp = self.targets_file.with_suffix(".tmp")
        tmp.write_text(json.dumps(payload))
        tmp.replace(self.targets_file)

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
                for s in self.query('timestamp(up{job="tokenfleet"})')
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
        data = self._get("/api/v1/query", params)
        if data["resultType"] == "scalar":
            return [Sample({}, float(data["result"][1]))]
        return [Sample(dict(r["metric"]), float(r["value"][1])) for r in data["result"]]

    def scalar(self, promql: str, at: float | None = None) -> float:
        """The single value of a query that must return exactly one sample."""
        samples = self.query(promql, at)
        if len(samples) != 1:
            raise AssertionError(f"PromQL {promql!r} returned {len(samples)} samples: {samples}")
        return samples[0].value

    def _get(self, path: str, params: dict[str, str]) -> dict[str, Any]:
        resp = self.http.get(path, params=params)
        body = resp.json()
        if resp.status_code != 200 or body.get("status") != "success":
            raise AssertionError(f"Prometheus {path} {params}: HTTP {resp.status_code} {body}")
        return dict(body["data"])

    def close(self) -> None:
        self.http.close()


def _config(targets_file: Path, interval_s: float) -> str:
    interval = f"{int(interval_s * 1000)}ms"
    return json.dumps(  # JSON is valid YAML; no yaml dependency needed here
        {
            "global": {"scrape_interval": interval, "scrape_timeout": interval},
            "scrape_configs": [
                {
                    "job_name": "tokenfleet",
                    "file_sd_configs": [{"files": [str(targets_file)], "refresh_interval": "1s"}],
                }
            ],
        },
        indent=2,
    )


@contextlib.contextmanager
def running_prometheus(
    workdir: Path, scrape_interval_s: float = SCRAPE_INTERVAL_S
) -> Iterator[Prometheus]:
    """Start Prometheus in `workdir` (config, targets file, TSDB, log), stop it afterwards."""
    binary = prometheus_binary()
    workdir.mkdir(parents=True, exist_ok=True)
    targets_file = workdir / "targets.json"
    targets_file.write_text("[]")
    config = workdir / "prometheus.yml"
    config.write_text(_config(targets_file, scrape_interval_s))
    port = free_port()
    log = (workdir / "prometheus.log").open("wb")
    process = subprocess.Popen(
        [
            binary,
            f"--config.file={config}",
            f"--storage.tsdb.path={workdir / 'tsdb'}",
            f"--web.listen-address=127.0.0.1:{port}",
            "--web.enable-lifecycle",
            "--log.level=warn",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    server = Prometheus(f"http://127.0.0.1:{port}", targets_file, process)
    try:
        _wait_ready(server, workdir / "prometheus.log")
        yield server
    finally:
        server.close()
        process.terminate()
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=5)
        log.close()


def _wait_ready(server: Prometheus, log_path: Path) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if server.process.poll() is not None:
            tail = log_path.read_text()[-2000:]
            raise RuntimeError(f"prometheus exited with {server.process.returncode}: {tail}")
        with contextlib.suppress(httpx.HTTPError):
            if server.http.get("/-/ready").status_code == 200:
                return
        time.sleep(0.1)
    raise TimeoutError(f"prometheus at {server.url} not ready in {START_TIMEOUT_S} s")


@pytest.fixture(scope="session")
def prometheus(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Prometheus]:
    """One real Prometheus for the session; tests set their own targets."""
    try:
        prometheus_binary()
    except FileNotFoundError as error:
        pytest.fail(str(error))
    with running_prometheus(tmp_path_factory.mktemp("prometheus")) as server:
        yield server
