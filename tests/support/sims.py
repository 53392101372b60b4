"""`tokenfleet sim` processes for system tests (the `start_sim` fixture and module fixtures
that need several simulators with their own arguments)."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import httpx

from tests.support.real_vllm import free_port

SIM_STARTUP_TIMEOUT_S = 30.0


@dataclass
class SimProcess:
    process: subprocess.Popen[bytes]
    port: int
    log_path: Path

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

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


def launch_sim(args: list[str], log_path: Path) -> SimProcess:
    """Run `tokenfleet sim ARGS --host 127.0.0.1 --port P` and wait for /v1/models."""
    port = free_port()
    command = [sys.executable, "-m", "tokenfleet.cli", "sim", *args]
    command += ["--host", "127.0.0.1", "--port", str(port)]
    with log_path.open("wb") as log:
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=os.environ)
    sim = SimProcess(process, port, log_path)
    deadline = time.monotonic() + SIM_STARTUP_TIMEOUT_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"tokenfleet sim exited early:\n{sim.log_tail()}")
        with contextlib.suppress(httpx.HTTPError):
            if httpx.get(f"{sim.base_url}/v1/models", timeout=2).status_code == 200:
                return sim
        time.sleep(0.2)
    sim.stop()
    raise RuntimeError(
        f"tokenfleet sim did not start in {SIM_STARTUP_TIMEOUT_S} s:\n{sim.log_tail()}"
    )
