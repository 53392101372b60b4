"""A real Prometheus server (Debian package `prometheus`) for the local fleet.

File-based service discovery: the kubelet rewrites one JSON file as pods come and go and
Prometheus follows within a second, no restart. `stop()` / `start()` keep the port and the
TSDB, so a test can take Prometheus down mid-run and bring the same server back.
`tokenfleet demo` runs outside pytest, so the server lives here; the system tests' fixture
starts its servers through this class too.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import socket
import subprocess
import time
from pathlib import Path
from typing import Any

import httpx

from tokenfleet.localfleet.procs import spawn, stop

START_TIMEOUT_S = 60.0
JOB = "engines"
# A floor so that a time-scaled interval never rounds down to "0ms", which Prometheus
# refuses as a config error; the fleet itself stays above it (fleet.MIN_SCRAPE_WALL_S).
MIN_INTERVAL_MS = 100


def prometheus_binary() -> str:
    found = os.environ.get("TOKENFLEET_PROMETHEUS") or shutil.which("prometheus")
    if not found:
        raise RuntimeError(
            "the demo needs a Prometheus server and `prometheus` is not on PATH: install it "
            "(Debian/Ubuntu: sudo apt-get install prometheus; macOS: brew install prometheus; "
            "or a release from https://prometheus.io/download/), or set "
            "TOKENFLEET_PROMETHEUS=/path/to/prometheus"
        )
    return found


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def write_target_groups(path: Path, groups: list[dict[str, Any]]) -> None:
    """Replace the file_sd target groups ([{"targets": [...], "labels": {...}}])."""
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(groups))
    tmp.replace(path)  # atomic: Prometheus never reads half a file


def instant_samples(data: dict[str, Any]) -> list[tuple[dict[str, str], float]]:
    """The `data` of an instant query's answer -> [(labels, value)], vector or scalar."""
    if data["resultType"] == "scalar":
        return [({}, float(data["result"][1]))]
    return [(dict(r["metric"]), float(r["value"][1])) for r in data["result"]]


class LocalPrometheus:
    def __init__(
        self,
        workdir: Path,
        scrape_interval_s: float,
        job: str = JOB,
        flags: tuple[str, ...] = (),
    ) -> None:
        self.workdir = workdir
        self.flags = flags  # extra command-line flags (a test enables the admin API)
        self.scrape_interval_s = scrape_interval_s
        self.job = job
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.targets_file = workdir / "targets.json"
        self.process: subprocess.Popen[bytes] | None = None
        self.http = httpx.Client(base_url=self.url, timeout=10.0, trust_env=False)

    def _write_config(self) -> Path:
        interval = f"{max(int(self.scrape_interval_s * 1000), MIN_INTERVAL_MS)}ms"
        config = {
            "global": {"scrape_interval": interval, "scrape_timeout": interval},
            "scrape_configs": [
                {
                    "job_name": self.job,
                    "file_sd_configs": [
                        {"files": [str(self.targets_file)], "refresh_interval": "1s"}
                    ],
                }
            ],
        }
        path = self.workdir / "prometheus.yml"
        path.write_text(json.dumps(config, indent=2))  # JSON is YAML
        return path

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def start(self) -> None:
        """Start (or start again) on the same port and TSDB; wait until ready."""
        self.workdir.mkdir(parents=True, exist_ok=True)
        if not self.targets_file.exists():
            self.targets_file.write_text("[]")
        config = self._write_config()
        self.process = spawn(
            [
                prometheus_binary(),
                f"--config.file={config}",
                f"--storage.tsdb.path={self.workdir / 'tsdb'}",
                f"--web.listen-address=127.0.0.1:{self.port}",
                "--log.level=warn",
                *self.flags,
            ],
            self.workdir / "prometheus.log",
        )
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                tail = (self.workdir / "prometheus.log").read_text(errors="replace")[-2000:]
                raise RuntimeError(f"prometheus exited with {self.process.returncode}: {tail}")
            with contextlib.suppress(httpx.HTTPError):
                if self.http.get("/-/ready").status_code == 200:
                    return
            time.sleep(0.1)
        raise RuntimeError(f"prometheus at {self.url} not ready in {START_TIMEOUT_S:.0f} s")

    def stop(self) -> None:
        stop(self.process, timeout_s=15)
        self.process = None

    def close(self) -> None:
        self.stop()
        self.http.close()

    def set_targets(self, groups: list[dict[str, Any]]) -> None:
        """Replace the file_sd target groups ([{"targets": [...], "labels": {...}}])."""
        write_target_groups(self.targets_file, groups)

    def query(self, promql: str) -> list[tuple[dict[str, str], float]]:
        """Instant query -> [(labels, value)]; raises httpx.HTTPError when unreachable."""
        response = self.http.get("/api/v1/query", params={"query": promql})
        body = response.json()
        if response.status_code != 200 or body.get("status") != "success":
            raise RuntimeError(f"PromQL {promql!r}: HTTP {response.status_code} {body}")
        return instant_samples(body["data"])
