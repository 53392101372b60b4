"""What the adapter loop does on each pod, the readiness gate, backoff and status (pure)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from tokenfleet.controller.adapter_plan import (
    BACKOFF_S,
    GATE,
    Attempts,
    PodView,
    Wanted,
    actions,
    adapter_status,
    gate_conditions,
    gate_message,
    gate_wanted,
    pod_view,
)

SQL, CHAT = Wanted("sql", "/mnt/adapters/c/sql"), Wanted("chat", "org/chat")


def view(loaded: set[str] | None, **kw: Any) -> PodView:
    base = PodView("p-0", "uid-0", "http://10.0.0.1:8000", True, 0, False, None,
                   frozenset(loaded) if loaded is not None else None)  # fmt: skip
    return replace(base, **kw)


def test_missing_adapters_are_loaded_and_dropped_ones_unloaded() -> None:
    got = actions([SQL, CHAT], view({"chat", "old"}), Attempts(), 0.0)
    assert [(a.kind, a.adapter.name) for a in got] == [("load", "sql"), ("unload", "old")]


@pytest.mark.parametrize(
    "pod",
    [
        view({"sql"}, serving=False),  # the engine is not up
        view({"sql"}, url=None),  # no IP yet
        view(None),  # its adapters could not be listed
    ],
)
def test_nothing_is_done_on_a_pod_that_cannot_answer(pod: PodView) -> None:
    assert actions([SQL, CHAT], pod, Attempts(), 0.0) == []


def test_a_failed_load_backs_off_then_is_retried() -> None:
    attempts = Attempts()
    pod = view(set())
    first = attempts.failed("uid-0", "chat", "load", "HTTP 404: No adapter found", now=100.0)
    assert (first.failures, first.retry_at) == (1, 100.0 + BACKOFF_S[0])
    assert [a.adapter.name for a in actions([SQL, CHAT], pod, attempts, 101.0)] == ["sql"]
    due = 100.0 + BACKOFF_S[0]
    assert [a.adapter.name for a in actions([SQL, CHAT], pod, attempts, due)] == ["sql", "chat"]
    for n in range(2, 20):
        failure = attempts.failed("uid-0", "chat", "load", "still", now=0.0)
        assert failure.failures == n
    assert failure.delay == BACKOFF_S[-1]  # capped, retried for ever
    attempts.succeeded("uid-0", "chat", "load")
    assert attempts.failure("uid-0", "chat", "load") is None


def test_errors_are_one_short_line() -> None:
    failure = Attempts().failed("u", "a", "load", "x\n" * 500, now=0.0)
    assert "\n" not in failure.error and len(failure.error) <= 300


def test_the_gate_opens_only_with_every_adapter_and_stays_open() -> None:
    assert gate_wanted([SQL, CHAT], view({"sql"})) is False
    assert gate_wanted([SQL, CHAT], view({"sql", "chat", "extra"})) is True
    # Passed once: a new adapter in the spec loads in the background, the pod keeps serving.
    assert gate_wanted([SQL, CHAT], view({"sql"}, gate=True, gate_restarts=0)) is None
    # ... unless its engine restarted since (its adapters went with it).
    restarted = view({"sql"}, gate=True, gate_restarts=0, restarts=1)
    assert gate_wanted([SQL, CHAT], restarted) is False
    assert gate_wanted([SQL], view(None)) is None
    assert gate_wanted([], view(set())) is True  # no adapter: nothing to wait for


def test_status_per_adapter() -> None:
    attempts = Attempts()
    a, b = view({"sql"}), view({"sql", "chat"}, name="p-1", uid="uid-1")
    starting = view(set(), name="p-2", uid="uid-2", serving=False)
    attempts.failed("uid-0", "chat", "load", "HTTP 404: No adapter found for org/chat", now=0.0)
    sql, chat = adapter_status([SQL, CHAT], [a, b, starting], attempts)
    assert sql == {"name": "sql", "loadedReplicas": 2, "replicas": 2, "state": "Loaded",
                   "message": "loaded on 2 of 2"}  # fmt: skip
    assert chat["state"] == "Failed" and (chat["loadedReplicas"], chat["replicas"]) == (1, 2)
    assert chat["message"] == (
        "loaded on 1 of 2; pod p-0: HTTP 404: No adapter found for org/chat "
        f"(attempt 1, retrying in {BACKOFF_S[0]:.0f}s)"
    )
    (pending,) = adapter_status([SQL], [starting], Attempts())
    assert pending["state"] == "Pending"
    (loading,) = adapter_status([CHAT], [a, b], Attempts())
    assert loading["state"] == "Loading" and loading["message"] == "loaded on 1 of 2"


def test_pod_view_reads_port_readiness_restarts_and_the_gate() -> None:
    ports = [{"name": "http", "containerPort": 8000}]
    pod = {
        "metadata": {"name": "p", "uid": "u"},
        "spec": {"containers": [{"name": "engine", "ports": ports}]},
        "status": {
            "podIP": "10.1.2.3",
            "containerStatuses": [{"name": "engine", "ready": True, "restartCount": 2}],
            "conditions": [{"type": GATE, "status": "True",
                            "message": "container restart 1: 3 adapter(s) loaded"}],
        },
    }  # fmt: skip
    seen = pod_view(pod, "engine", "http")
    assert (seen.url, seen.serving, seen.restarts) == ("http://10.1.2.3:8000", True, 2)
    assert (seen.gate, seen.gate_restarts) == (True, 1)
    assert gate_message(seen, 3) == "container restart 2: 3 adapter(s) loaded"
    deleting = {**pod, "metadata": {**pod["metadata"], "deletionTimestamp": "now"}}
    assert not pod_view(deleting, "engine", "http").serving


def test_the_gate_condition_keeps_the_kubelets() -> None:
    kubelet = [{"type": "Ready", "status": "False"}, {"type": GATE, "status": "False"}]
    got = gate_conditions(kubelet, True, "m", "2026-01-01T00:00:00Z")
    assert got[0] == {"type": "Ready", "status": "False"}
    assert got[1]["type"] == GATE and got[1]["status"] == "True" and len(got) == 2
