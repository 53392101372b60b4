"""Benchmark: the real `tokenfleet operator` process with N LLMServices against kmock.

Three phases, each timed from its first request until the operator has caught up: create
(every Deployment exists and every status is written), update (a spec change of every
LLMService: each status observes the new generation), delete (no LLMService, none of their
children, and none of their series on the operator's /metrics). Reports (prints, never
asserts on) those times, the operator process's peak RSS (VmHWM) and per LLMService the
API requests the operator sent and the reconciles it ran (its own
tokenfleet_reconciles_total) for the creates, once the operator is idle. It asserts the
outcome: all N reconciled, all N updated, nothing left after the deletes, and the peak RSS
under 250 MiB (issue 30: 356 MiB at 1,000, under a chart limit of 512Mi).

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
from tests.support.fake_prometheus import FakePrometheus
from tests.support.operator_harness import kubeconfig_for
from tokenfleet.testing.kmock_cluster import LLMSERVICES, Cluster

COUNT = int(os.environ.get("TOKENFLEET_BENCH_SERVICES", "500"))
# After the last status: let the echoes of the operator's own writes arrive and settle.
SETTLE_SECONDS = 10.0
NAMESPACE = "bench"
EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "llama-3.1-8b-l4.yaml"
GIVE_UP_SECONDS = float(os.environ.get("TOKENFLEET_BENCH_GIVE_UP", "900"))  # a failure bound
RSS_LIMIT_MIB = 250.0
CHILDREN = ("apps/v1/deployments", "v1/services", "policy/v1/poddisruptionbudgets")
MERGE = {"Content-Type": "application/merge-patch+json"}


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


def exposition(port: int) -> str:
    return str(
        urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
    )


def reconciles(port: int) -> float:
    return sum(
        float(line.rsplit(" ", 1)[1])
        for line in exposition(port).splitlines()
        if line.startswith("tokenfleet_reconciles_total{")
    )


def series_of_services(port: int) -> int:
    """Lines of the operator's metrics that still name one of the bench's LLMServices."""
    return sum('llmservice="llm-' in line for line in exposition(port).splitlines())


def observed(cluster: Cluster, generation: int) -> int:
    return count(
        cluster,
        LLMSERVICES,
        lambda o: (o.get("status") or {}).get("observedGeneration", 0) >= generation,
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


async def test_create_update_delete_many_llmservices(tmp_path: Path) -> None:
    template = next(
        d for d in yaml.safe_load_all(EXAMPLE.read_text()) if d and d["kind"] == "LLMService"
    )
    # Every LLMService autoscales (a loop, a Prometheus client, metric series each) on a
    # Prometheus that answers every query with 0: no engine reports, so each tick holds
    # (NoData) and writes its status. One tick at the start, then every 5 minutes.
    template["spec"]["autoscaling"]["intervalSeconds"] = 300
    names = [f"llm-{i:04d}" for i in range(COUNT)]
    path = f"/apis/tokenfleet.dev/v1alpha1/namespaces/{NAMESPACE}/llmservices"
    async with Cluster() as cluster, Server(cluster) as server, FakePrometheus(value="0") as prom:
        config = tmp_path / "kubeconfig"
        config.write_text(yaml.safe_dump(kubeconfig_for(str(server.url).rstrip("/"))))
        log = tmp_path / "operator.log"
        env = {**os.environ, "KUBECONFIG": str(config)}
        command = [sys.executable, "-m", "tokenfleet.cli", "operator", "--standalone"]
        metrics_port = free_port()
        command += ["--liveness", "", "--metrics-port", str(metrics_port)]
        # No periodic resync during the run: count the reconciles the changes cause.
        command += ["--resync-seconds", "3600", "--prometheus-url", prom.url]
        with log.open("wb") as out:
            proc = subprocess.Popen(command, env=env, stdout=out, stderr=subprocess.STDOUT)
        gate = asyncio.Semaphore(16)  # 16 clients at a time, as kubectl apply -f of a folder

        async def each(request: Any) -> None:
            async def one(name: str) -> None:
                async with gate:
                    response = await request(name)
                    assert response.status < 300, await response.text()

            await asyncio.gather(*(one(name) for name in names))

        def create(name: str) -> Any:
            body = copy.deepcopy(template)
            body["metadata"] = {"name": name, "namespace": NAMESPACE}
            return cluster.post(path, json=body)

        def update(name: str) -> Any:  # a new generation: a re-plan and a new Deployment
            change = {"spec": {"workload": {"maxModelLen": 4096}}}
            return cluster.patch(f"{path}/{name}", json=change, headers=MERGE)

        def delete(name: str) -> Any:
            return cluster.delete(f"{path}/{name}")

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

            before = len(cluster._requests)  # the operator's start-up (lists, watches) aside
            started = time.monotonic()
            await each(create)
            await wait_for(
                lambda: count(cluster, "apps/v1/deployments") >= COUNT, "Deployments", proc, log
            )
            deployments = time.monotonic() - started
            await wait_for(lambda: observed(cluster, 1) >= COUNT, "statuses", proc, log)
            created = time.monotonic() - started
            await asyncio.sleep(SETTLE_SECONDS)
            requests = len(cluster._requests) - before
            passes = reconciles(metrics_port)
            series = series_of_services(metrics_port)
            created_rss = peak_rss_mib(proc.pid)

            started = time.monotonic()
            await each(update)
            await wait_for(lambda: observed(cluster, 2) >= COUNT, "the updates", proc, log)
            updated = time.monotonic() - started

            started = time.monotonic()
            await each(delete)

            def nothing_left() -> bool:
                keys = (LLMSERVICES, *CHILDREN)
                return not any(count(cluster, key) for key in keys)

            await wait_for(nothing_left, "every object gone", proc, log)
            await wait_for(
                lambda: series_of_services(metrics_port) == 0, "their series gone", proc, log
            )
            deleted = time.monotonic() - started
            peak = peak_rss_mib(proc.pid)
            operator_cpu = cpu_seconds(proc.pid)
            own_cpu = time.process_time()
        finally:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()

    print(
        f"\n{COUNT} LLMServices (real operator process vs kmock, 2 cores shared):"
        f"\n  create: every Deployment after {deployments:6.1f} s, every status {created:6.1f} s"
        f"\n  update: every new generation observed after {updated:6.1f} s"
        f"\n  delete: nothing left (objects, metric series) after {deleted:6.1f} s"
        f"\n  operator peak RSS {peak:6.1f} MiB (after the creates {created_rss:.1f}; "
        f"idle {idle_rss:.1f}; limit {RSS_LIMIT_MIB:.0f})"
        f"\n  per LLMService created: {(requests - COUNT) / COUNT:.1f} operator requests, "
        f"{passes / COUNT:.2f} reconciles (after {SETTLE_SECONDS:.0f} s idle), "
        f"{series / COUNT:.1f} metric series"
        f"\n  CPU: operator {operator_cpu:.1f} s, kmock + test {own_cpu:.1f} s"
    )
    assert series >= COUNT  # the autoscalers' series existed: "none left" means removed
    assert peak < RSS_LIMIT_MIB, f"peak RSS {peak:.0f} MiB"
