"""The real `tokenfleet operator` process against a kmock apiserver, for tests that need
what only a process shows: its peak RSS, its log (tracebacks), SIGKILL."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.support.operator_harness import WAIT_SECONDS
from tokenfleet.testing.kmock_cluster import Cluster


def peak_rss_mib(pid: int) -> float:
    """VmHWM: the most resident memory the process ever had (not a sample)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    raise AssertionError(f"no VmHWM for pid {pid}")


class OperatorProcess:
    def __init__(self, kubeconfig: Path, log: Path, *extra: str, standalone: bool = True) -> None:
        self.kubeconfig = kubeconfig
        self.log = log
        self.extra = extra
        self.standalone = standalone  # False: leader election (pass --peering / --priority)
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        env = {**os.environ, "KUBECONFIG": str(self.kubeconfig)}
        command = [sys.executable, "-m", "tokenfleet.cli", "operator"]
        command += ["--standalone"] if self.standalone else []
        command += ["--liveness", "", "--metrics-port", "0", *self.extra]
        with self.log.open("ab") as out:
            self.proc = subprocess.Popen(command, env=env, stdout=out, stderr=subprocess.STDOUT)

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def text(self) -> str:
        return self.log.read_text(errors="replace")

    async def watching(self, cluster: Cluster, since: int = 0) -> None:
        """Wait until it watches LLMServices (it is up and listening)."""

        def seen() -> bool:
            requests = list(cluster._requests)[since:]
            return any(
                "llmservices" in r.url.path and "watch=" in r.url.query_string for r in requests
            )

        await self.wait(seen, "the operator to watch LLMServices")

    async def wait(self, predicate: Any, what: str, timeout: float = WAIT_SECONDS) -> None:
        deadline = asyncio.get_running_loop().time() + timeout
        while not predicate():
            assert self.proc is not None
            if self.proc.poll() is not None:
                raise AssertionError(
                    f"the operator exited ({self.proc.returncode}):\n{self.tail()}"
                )
            if asyncio.get_running_loop().time() > deadline:
                raise AssertionError(f"timed out waiting for {what}:\n{self.tail()}")
            await asyncio.sleep(0.1)

    def tail(self) -> str:
        return self.text()[-4000:]

    def kill(self) -> None:
        """SIGKILL: no cleanup, no graceful stop (a node failure, an OOM kill)."""
        assert self.proc is not None
        self.proc.kill()
        self.proc.wait(timeout=30)

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=30)
