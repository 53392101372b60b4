"""`tokenfleet sim` processes for system tests (the `start_sim` fixture, module fixtures
that need several simulators with their own arguments, and `running_sim` for a simulator
of the default model that a test reads /metrics from)."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
from prometheus_client.parser import text_string_to_metric_families

from tests.support.real_vllm import free_port

SIM_STARTUP_TIMEOUT_S = 30.0
MODEL = "meta-llama/Llama-3.1-8B"
GPU = "l4"


@dataclass
class SimProcess:
    process: subprocess.Popen[bytes]
    port: int
    log_path: Path

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def target(self) -> str:
        """host:port, as a Prometheus scrape target."""
        return f"127.0.0.1:{self.port}"

    def metrics(self) -> dict[str, float]:
        """Sample name + sorted labels -> value, from the simulator's /metrics."""
        text = httpx.get(f"{self.base_url}/metrics", timeout=10, trust_env=False).text
        out: dict[str, float] = {}
        for family in text_string_to_metric_families(text):
            for s in family.samples:
                labels = ",".join(f"{k}={v}" for k, v in sorted(s.labels.items()))
                out[f"{s.name}{{{labels}}}"] = s.value
        return out

    def log_tail(self) -> str:
        return self.log_path.read_text(errors="replace")[-3000:]

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)


def launch_sim(
    args: list[str], log_path: Path, startup_timeout_s: float = SIM_STARTUP_TIMEOUT_S
) -> SimProcess:
    """Run `tokenfleet sim ARGS --host 127.0.0.1 --port P` and wait for /v1/models."""
    port = free_port()
    command = [sys.executable, "-m", "tokenfleet.cli", "sim", *args]
    command += ["--host", "127.0.0.1", "--port", str(port)]
    with log_path.open("wb") as log:
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=os.environ)
    sim = SimProcess(process, port, log_path)
    deadline = time.monotonic() + startup_timeout_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"tokenfleet sim exited early:\n{sim.log_tail()}")
        with contextlib.suppress(httpx.HTTPError):
            if httpx.get(f"{sim.base_url}/v1/models", timeout=2).status_code == 200:
                return sim
        time.sleep(0.2)
    sim.stop()
    raise RuntimeError(f"tokenfleet sim did not start in {startup_timeout_s} s:\n{sim.log_tail()}")


@contextlib.contextmanager
def running_sim(workdir: Path, time_scale: float) -> Iterator[SimProcess]:
    """`tokenfleet sim` of MODEL on GPU (the real CLI, as a subprocess) at `time_scale`,
    stopped when the block ends."""
    workdir.mkdir(parents=True, exist_ok=True)
    args = ["--model", MODEL, "--gpu", GPU, "--time-scale", str(time_scale)]
    sim = launch_sim(args, workdir / "sim.log", startup_timeout_s=60)
    try:
        yield sim
    finally:
        sim.stop()
