"""Issue 17: a tenant's Prometheus cannot take the real `tokenfleet operator` process down
or freeze its autoscaler. Each test runs the process against the emulated API and a fake
Prometheus (tests/support/fake_prometheus.py) that misbehaves on purpose:

- a 40 MB answer: refused at the size cap while streaming; the operator's peak RSS stays
  under 300 MiB (the issue saw 785 MiB) and the condition says why;
- a trickling answer: cut at the tick deadline, the connection closed, the hold says so;
  fixing spec.autoscaling.prometheus.url restarts the loop on the new URL;
- a non-numeric value: a hold with the reason, one warning, no traceback;
- a URL the operator does not allow: refused, named in the condition, never dialled;
- deleting the LLMServices closes their sockets and removes their metric series.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import urllib.request
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from kmock import Server

from tests.support.cluster_objects import LLMS_PATH, condition, create, example, patch
from tests.support.fake_prometheus import FakePrometheus
from tests.support.operator_harness import NAMESPACE, kubeconfig_for
from tests.support.operator_process import OperatorProcess, peak_rss_mib
from tokenfleet.testing.kmock_cluster import Cluster

RSS_LIMIT_MIB = 300.0
NAME = "llama"


@dataclass
class Setup:
    cluster: Cluster
    kubeconfig: Path
    tmp: Path


@pytest.fixture
async def setup(tmp_path: Path) -> AsyncIterator[Setup]:
    async with Cluster() as cluster, Server(cluster) as server:
        cluster.objects["v1/namespaces", None, NAMESPACE] = {"metadata": {"name": NAMESPACE}}
        kubeconfig = tmp_path / "kubeconfig"
        kubeconfig.write_text(yaml.safe_dump(kubeconfig_for(str(server.url).rstrip("/"))))
        yield Setup(cluster, kubeconfig, tmp_path)


def autoscaled(name: str = NAME, url: str | None = None) -> dict[str, Any]:
    body = example("llama-3.1-8b-l4.yaml")
    body["metadata"]["name"] = name
    auto = body["spec"]["autoscaling"]
    auto.update({"enabled": True, "intervalSeconds": 5})
    auto.pop("prometheus", None)
    if url is not None:
        auto["prometheus"] = {"url": url}
    return body


def held_message(cluster: Cluster, name: str = NAME) -> str:
    cond = condition(cluster, name, "Autoscaling")
    return str(cond.get("message", "")) if cond.get("reason") == "Held" else ""


def assert_no_traceback(operator: OperatorProcess) -> None:
    log = operator.text()
    assert "Traceback" not in log, log[log.index("Traceback") - 500 :][:4000]


@contextlib.asynccontextmanager
async def running(setup: Setup, *flags: str) -> AsyncIterator[OperatorProcess]:
    """The operator process with `flags`, watching the cluster; stopped when the block ends."""
    operator = OperatorProcess(setup.kubeconfig, setup.tmp / "op.log", *flags)
    operator.start()
    try:
        await operator.watching(setup.cluster)
        yield operator
    finally:
        operator.stop()


async def test_a_40_mb_answer_is_refused_at_the_cap(setup: Setup) -> None:
    async with FakePrometheus(mode="huge") as prom:
        async with running(setup, "--prometheus-url", prom.url) as operator:
            await create(setup.cluster, autoscaled())
            await operator.wait(lambda: "cap" in held_message(setup.cluster), "Held over the cap")
            await operator.wait(lambda: prom.queries >= 3, "three ticks of huge answers")
            peak = peak_rss_mib(operator.pid)
        assert "refused" in held_message(setup.cluster)
        assert_no_traceback(operator)
        assert peak < RSS_LIMIT_MIB, f"peak RSS {peak:.0f} MiB"
        print(f"\n40 MB answers: operator peak RSS {peak:.0f} MiB")


async def test_a_trickle_is_cut_and_a_fixed_url_revives_the_loop(setup: Setup) -> None:
    async with FakePrometheus(mode="trickle") as slow, FakePrometheus() as good:
        flags = ("--allow-prometheus", slow.url, "--allow-prometheus", good.url)
        async with running(setup, *flags) as operator:
            await create(setup.cluster, autoscaled(url=slow.url))
            await operator.wait(
                lambda: "tick deadline" in held_message(setup.cluster), "Held at the deadline"
            )
            # Cut, not left hanging: the next tick opens a new one, the old is closed.
            await operator.wait(lambda: slow.queries >= 2, "a second tick")

            await patch(
                setup.cluster,
                f"{LLMS_PATH}/{NAME}",
                {"spec": {"autoscaling": {"prometheus": {"url": good.url}}}},
            )
            await operator.wait(lambda: good.queries > 0, "queries on the fixed URL")
            await operator.wait(lambda: slow.open_connections == 0, "the trickle closed")
            await operator.wait(
                lambda: "tick deadline" not in str(condition(setup.cluster, NAME, "Autoscaling")),
                "a decision on the fixed URL",
            )
        assert_no_traceback(operator)


async def test_a_garbage_value_holds_with_a_reason_and_one_warning(setup: Setup) -> None:
    async with FakePrometheus(mode="garbage") as prom:
        async with running(setup, "--prometheus-url", prom.url) as operator:
            await create(setup.cluster, autoscaled())
            await operator.wait(
                lambda: "is not a number" in held_message(setup.cluster), "Held on garbage"
            )
            seen = prom.queries
            await operator.wait(lambda: prom.queries >= seen * 3, "more ticks on garbage")
        assert_no_traceback(operator)
        warnings = [
            line
            for line in operator.text().splitlines()
            if "Prometheus:" in line and "WARNING" in line
        ]
        assert len(warnings) == 1, warnings


async def test_a_url_the_operator_does_not_allow_is_never_dialled(setup: Setup) -> None:
    async with FakePrometheus() as own, FakePrometheus() as tenant:
        async with running(setup, "--prometheus-url", own.url) as operator:
            await create(setup.cluster, autoscaled(url=tenant.url))

            def refused() -> bool:
                cond = condition(setup.cluster, NAME, "Autoscaling")
                return "--allow-prometheus" in str(cond.get("message", ""))

            await operator.wait(refused, "the refusal in the condition")
            message = condition(setup.cluster, NAME, "Autoscaling")["message"]
            assert f"spec.autoscaling.prometheus.url {tenant.url!r}" in message
            await asyncio.sleep(6)  # one more interval
        assert tenant.queries == 0
        assert_no_traceback(operator)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def sockets_to(pid: int, port: int) -> int:
    """The process's open TCP connections to `port` (its socket inodes in /proc/net/tcp)."""
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            target = str(fd.readlink())
        except OSError:  # closed meanwhile
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    count = 0
    for table in ("tcp", "tcp6"):
        for line in Path(f"/proc/{pid}/net/{table}").read_text().splitlines()[1:]:
            fields = line.split()
            remote_port = int(fields[2].rsplit(":", 1)[1], 16)
            if remote_port == port and fields[9] in inodes:
                count += 1
    return count


def series_of(port: int, names: set[str]) -> list[str]:
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
    return [
        line
        for line in text.splitlines()
        if not line.startswith("#") and any(f'llmservice="{n}"' in line for n in names)
    ]


async def test_deletion_returns_sockets_and_series_to_the_baseline(setup: Setup) -> None:
    names = {f"svc-{i}" for i in range(12)}
    metrics_port = free_port()
    async with FakePrometheus() as prom:
        flags = ("--prometheus-url", prom.url, "--metrics-port", str(metrics_port))
        async with running(setup, *flags) as operator:
            port = int(prom.url.rsplit(":", 1)[1])
            baseline = sockets_to(operator.pid, port)
            for name in sorted(names):
                await create(setup.cluster, autoscaled(name))
            await operator.wait(
                lambda: {n for n in names if condition(setup.cluster, n, "Autoscaling")} == names,
                "every LLMService autoscaled",
            )
            await operator.wait(
                lambda: len(series_of(metrics_port, names)) > 0, "their metric series"
            )
            during = sockets_to(operator.pid, port)
            for name in sorted(names):
                response = await setup.cluster.delete(f"{LLMS_PATH}/{name}")
                assert response.status < 300
            await operator.wait(lambda: series_of(metrics_port, names) == [], "the series removed")
            await operator.wait(
                lambda: sockets_to(operator.pid, port) <= baseline, "sockets closed"
            )
        assert_no_traceback(operator)
        assert during > baseline  # the count sees the autoscalers' connections
        print(f"\nsockets to Prometheus: {baseline} before, {during} with {len(names)}, 0 after")
