"""Benchmark: the real `tokenfleet operator` process reconciling N LLMServices against kmock.

Reports (prints, never asserts on) the time from the first create until every Deployment
exists and every status is written, the operator process's peak RSS (VmHWM), and per
LLMService: the API requests the operator sent and the reconciles it ran (its own
tokenfleet_reconciles_total), counted once everything is written and the operator is idle.
Targets: under 60 s and under 300 MB. It does assert the outcome: all N reconciled.

    TOKENFLEET_BENCH_SERVICES=1000 .venv/bin/pytest tests/bench/test_reconcile_many.py -s
"""

from __future__ import annotations

import asyncio
import copy
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

import yaml
from kmock import Server, resource

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the checkout: tests.support
from tests.support.operator_harness import kubeconfig_for
from tokenfleet.testing.kmock_cluster import LLMSERVICES, Cluster

COUNT = int(os.environ.get("TOKENFLEET_BENCH_SERVICES", "500"))
# After the last status: let the echoes of the operator's own writes arrive and settle.
SETTLE_SECONDS = 10.0
NAMESPACE = "bench"
EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "llama-3.1-8b-l4.yaml"
GIVE_UP_SECONDS = float(os.environ.get("TOKENFLEET_BENCH_GIVE_UP", "600"))  # a failure bound


def count(cluster: Cluster, key: str, check: Any = None) -> int:
    res = resource(key)
    return sum(
        1
        for (r, _, _), obj in cluster.objects.items()
        if r == res and not obj.deleted and (check is None or check(obj.raw))
    )


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def reconciles(port: int) -> float:
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
    return sum(
        float(line.rsplit(" ", 1)[1])
        for line in text.splitlines()
        if line.startswith("tokenfleet_reconciles_total{")
    )


def peak_rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


async def wait_for(predicate: Any, what: str, proc: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + GIVE_UP_SECONDS
    while not predicate():
        if proc.poll() is not None:
            raise AssertionError(
                f"the operator exited ({proc.returncode}):\n{log.read_text()[-3000:]}"
            )
        if time.monotonic() > deadline:
            raise AssertionError(f"gave up waiting for {what}:\n{log.read_text()[-3000:]}")
        await asyncio.sleep(0.2)


async def test_reconcile_500_llmservices(tmp_path: Path) -> None:
    template = next(
        d for d in yaml.safe_load_all(EXAMPLE.read_text()) if d and d["kind"] == "LLMService"
    )
    async with Cluster() as cluster, Server(cluster) as server:
        config = tmp_path / "kubeconfig"
        config.write_text(yaml.safe_dump(kubeconfig_for(str(server.url).rstrip("/"))))
        log = tmp_path / "operator.log"
        env = {**os.environ, "KUBECONFIG": str(config)}
        command = [sys.executable, "-m", "tokenfleet.cli", "operator", "--standalone"]
        metrics_port = free_port()
        command += ["--liveness", "", "--metrics-port", str(metrics_port)]
        # No periodic resync during the run: count the reconciles the changes cause.
        command += ["--resync-seconds", "3600"]
        with log.open("wb") as out:
            proc = subprocess.Popen(command, env=env, stdout=out, stderr=subprocess.STDOUT)
        try:
            await wait_for(
                lambda: any(
                    "llmservices" in r.url.path and "watch=" in r.url.query_string
                    for r in list(cluster._requests)
                ),
                "the operator to watch LLMServices",
                proc,
                log,
            )
            idle_rss = peak_rss_mib(proc.pid)

            path = f"/apis/tokenfleet.dev/v1alpha1/namespaces/{NAMESPACE}/llmservices"
            gate = asyncio.Semaphore(16)

            async def create(i: int) -> None:
                body = copy.deepcopy(template)
                body["metadata"] = {"name": f"llm-{i:03d}", "namespace": NAMESPACE}
                async with gate:
                    response = await cluster.post(path, json=body)
                    assert response.status < 300, await response.text()

            before = len(cluster._requests)  # the operator's start-up (lists, watches) aside
            started = time.monotonic()
            await asyncio.gather(*(create(i) for i in range(COUNT)))
            created = time.monotonic() - started
            await wait_for(
                lambda: count(cluster, "apps/v1/deployments") >= COUNT, "Deployments", proc, log
            )
            deployments = time.monotonic() - started
            await wait_for(
                lambda: (
                    count(
                        cluster,
                        LLMSERVICES,
                        lambda o: o.get("status", {}).get("observedGeneration"),
                    )
                    >= COUNT
                ),
                "statuses",
                proc,
                log,
            )
            statuses = time.monotonic() - started
            await asyncio.sleep(SETTLE_SECONDS)
            requests = len(cluster._requests) - before
            passes = reconciles(metrics_port)
            peak = peak_rss_mib(proc.pid)
            operator_cpu = cpu_seconds(proc.pid)
            own_cpu = time.process_time()
        finally:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()

    writes = len(cluster.writes)
    print(
        f"\nreconcile {COUNT} LLMServices (real operator process vs kmock, 2 cores shared):"
        f"\n  {COUNT} creates posted in          {created:6.1f} s"
        f"\n  every Deployment exists after  {deployments:6.1f} s   (target < 60 s)"
        f"\n  every status written after     {statuses:6.1f} s"
        f"\n  operator peak RSS              {peak:6.1f} MiB (target < 300 MB; idle {idle_rss:.1f})"
        f"\n  state-changing API writes      {writes}"
        f"\n  per LLMService: {(requests - COUNT) / COUNT:.1f} operator requests, "
        f"{passes / COUNT:.2f} reconciles (after {SETTLE_SECONDS:.0f} s idle)"
        f"\n  CPU: operator {operator_cpu:.1f} s, kmock + test {own_cpu:.1f} s"
    )
    assert count(cluster, "apps/v1/deployments") == COUNT
