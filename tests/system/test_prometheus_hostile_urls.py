"""A tenant cannot reach past its Prometheus (issue 30), against a REAL Prometheus started
with `--web.enable-lifecycle --web.enable-admin-api`, the endpoints a hostile URL aimed at:
`POST /-/quit` stopped it and `.../admin/tsdb/delete_series?match[]=up&x=` deleted `up`'s
history when the operator string-matched its allowlist and used the tenant's string as the
HTTP client's base URL.

The real `tokenfleet operator` process runs against the emulated API with that Prometheus
(and a path-scoped entry below it) allowed. One LLMService per hostile URL form, plus two
that are allowed (the base, and a path below it that names the quit endpoint, which only
ever becomes `<that path>/api/v1/query`), plus one on a URL the operator does not allow.
Each hostile one ends with a condition naming `spec.autoscaling.prometheus.url`; after a
minute of 5 s ticks Prometheus is up, its own request counters show no call to a lifecycle
or admin endpoint, and `up`'s history is what it was before the LLMServices existed.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.prometheus import Prometheus, running_prometheus
from tokenfleet.api.prometheus_url import FIELD
from tokenfleet.localfleet import procs
from tokenfleet.localfleet.demo import load_llmservice
from tokenfleet.localfleet.emulated import EmulatedApi

pytestmark = pytest.mark.system

NAMESPACE = "tenant-a"
LLMSERVICES = "tokenfleet.dev/v1alpha1/llmservices"
EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "llama-3.1-8b-l4-autoscale.yaml"
FLAGS = ("--web.enable-lifecycle", "--web.enable-admin-api")
WAIT_S = 90.0
WATCH_S = 60.0  # "still up, series intact after a minute"


def hostile(base: str) -> dict[str, tuple[str, str]]:
    """name -> (url, what the refusal says)."""
    return {
        "quit-query": (f"{base}/-/quit?", "has a query"),
        "delete-series": (
            f"{base}/api/v1/admin/tsdb/delete_series?match[]=up&x=",
            "has a query",
        ),
        "quit-fragment": (f"{base}/-/quit#", "has a fragment"),
        "dot-segments": (f"{base}/tenant-a/../tenant-b", "dot segment"),
        "percent-encoded": (f"{base}/tenant-a/%2e%2e/-/quit", "percent-encoded"),
        "userinfo": (f"http://tenant@{base.removeprefix('http://')}", "userinfo"),
        "crlf": (f"{base}/tenant-a\r\nX-Injected: 1", "control character"),
    }


def llmservice(name: str, url: str) -> dict[str, Any]:
    body = load_llmservice(EXAMPLE)
    body["metadata"] = {"name": name, "namespace": NAMESPACE}
    auto = body["spec"]["autoscaling"]
    auto.update({"enabled": True, "intervalSeconds": 5, "prometheus": {"url": url}})
    return body


def condition(api: EmulatedApi, name: str, kind: str) -> dict[str, Any]:
    body = api.get(LLMSERVICES, NAMESPACE, name) or {}
    conditions = (body.get("status") or {}).get("conditions") or []
    return next((c for c in conditions if c.get("type") == kind), {})


async def until(check: Callable[[], bool], what: str, operator: Any, log: Path) -> None:
    deadline = time.monotonic() + WAIT_S
    while not check():
        if operator.poll() is not None or time.monotonic() > deadline:
            tail = log.read_text(errors="replace")[-3000:]
            raise AssertionError(f"waiting for {what} (operator rc {operator.poll()}):\n{tail}")
        await asyncio.sleep(0.2)


def lifecycle_and_admin_calls(prom: Prometheus) -> float:
    """Requests Prometheus itself counted on its lifecycle and admin handlers."""
    selector = 'prometheus_http_requests_total{handler=~"/-/(quit|reload)|/api/v1/admin/.*"}'
    return sum(s.value for s in prom.query(selector))


def up_history(prom: Prometheus, at: float) -> float:
    """How many samples of `up` the TSDB holds in the 5 minutes before `at`."""
    return prom.scalar('sum(count_over_time(up{job="tokenfleet"}[5m]))', at)


async def test_hostile_prometheus_urls_reach_no_endpoint_but_the_query_api(
    tmp_path: Path,
) -> None:
    with running_prometheus(tmp_path / "prom", flags=FLAGS) as prom:
        own = prom.url.removeprefix("http://")
        prom.set_targets([own])  # Prometheus scrapes itself: `up` and its request counters
        prom.wait_targets_up([own])
        await asyncio.sleep(3)  # a few samples of history to keep
        before = time.time()
        history = up_history(prom, before)
        assert history > 0

        cases = hostile(prom.url)
        allowed = {"allowed-base": prom.url, "allowed-quit-path": f"{prom.url}/-/quit"}
        other = "http://127.0.0.1:1"  # a URL the operator does not allow
        async with EmulatedApi(tmp_path, (NAMESPACE,)) as api:
            log = tmp_path / "operator.log"
            argv = procs.tokenfleet(
                "operator", "--standalone", "--liveness", "", "--metrics-port", "0",
                "--allow-prometheus", prom.url, "--allow-prometheus", f"{prom.url}/tenant-a",
            )  # fmt: skip
            operator = procs.spawn(argv, log, {**os.environ, "KUBECONFIG": str(api.kubeconfig)})
            try:
                for name, (url, _) in cases.items():
                    await api.create(llmservice(name, url))
                for name, url in allowed.items():
                    await api.create(llmservice(name, url))
                await api.create(llmservice("not-allowed", other))

                def refused() -> set[str]:
                    done = set()
                    for name, (_, problem) in cases.items():
                        cond = condition(api, name, "Degraded")
                        message = str(cond.get("message", ""))
                        if cond.get("status") == "True" and FIELD in message and problem in message:
                            done.add(name)
                    return done

                await until(
                    lambda: refused() == set(cases), "each hostile URL refused", operator, log
                )

                def awaiting_refusal() -> bool:
                    message = str(condition(api, "not-allowed", "Autoscaling").get("message", ""))
                    return f"{FIELD} {other!r}" in message and "--allow-prometheus" in message

                await until(awaiting_refusal, "the not-allowed URL refused", operator, log)
                await until(
                    lambda: all(
                        condition(api, name, "Autoscaling").get("reason") == "Held"
                        for name in allowed
                    ),
                    "the allowed ones deciding (held: no engine reports yet)",
                    operator,
                    log,
                )
                await asyncio.sleep(WATCH_S)  # a dozen 5 s ticks of every LLMService
                assert operator.poll() is None, log.read_text(errors="replace")[-3000:]
                # The path below the allowed base reached Prometheus only as
                # <path>/api/v1/query, a 404 (no handler): that one holds on the answer.
                held = str(condition(api, "allowed-quit-path", "Autoscaling").get("message"))
                assert "HTTP 404" in held
            finally:
                procs.stop(operator, timeout_s=20)

        assert prom.process.poll() is None, "Prometheus exited"
        assert httpx.get(f"{prom.url}/-/ready", timeout=10).status_code == 200
        assert up_history(prom, before) == history  # no series deleted
        assert prom.query('up{job="tokenfleet"}')[0].value == 1.0
        assert lifecycle_and_admin_calls(prom) == 0
        queries = prom.query('sum(prometheus_http_requests_total{handler="/api/v1/query"})')
        assert queries and queries[0].value > 0  # the allowed ones did query
        text = log.read_text(errors="replace")
        assert "Traceback" not in text, text[text.index("Traceback") - 300 :][:3000]
