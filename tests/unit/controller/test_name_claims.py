"""controller/names.py: derived names across LLMServices; the `<x>-lws` case."""

from __future__ import annotations

from typing import Any

from tokenfleet.controller.names import NameClaims


def manifest(kind: str, name: str, namespace: str = "ns") -> dict[str, Any]:
    return {"kind": kind, "metadata": {"name": name, "namespace": namespace}}


def test_a_leaderworkerset_claims_its_headless_service_name() -> None:
    claims = NameClaims()
    assert claims.claim(("ns", "x"), [manifest("LeaderWorkerSet", "x-lws")]) == []
    (message,) = claims.claim(("ns", "x-lws"), [manifest("Deployment", "x-lws"),
                                                 manifest("Service", "x-lws")])  # fmt: skip
    assert "Service ns/x-lws" in message
    assert "LLMService x-lws and LLMService x" in message and "rename one" in message


def test_a_refused_claim_takes_nothing_and_the_holder_keeps_renewing() -> None:
    claims = NameClaims()
    claims.claim(("ns", "x-lws"), [manifest("Service", "x-lws"), manifest("Deployment", "x-lws")])
    assert claims.claim(("ns", "x"), [manifest("Service", "x"),
                                       manifest("LeaderWorkerSet", "x-lws")])  # fmt: skip
    # x took none of its names: another LLMService may still have Service x.
    assert claims.claim(("ns", "other"), [manifest("Service", "other")]) == []
    assert claims.claim(("ns", "x-lws"), [manifest("Service", "x-lws")]) == []


def test_forgetting_the_holder_frees_its_names() -> None:
    claims = NameClaims()
    claims.claim(("ns", "x-lws"), [manifest("Service", "x-lws")])
    claims.forget(("ns", "x-lws"))
    assert claims.claim(("ns", "x"), [manifest("LeaderWorkerSet", "x-lws")]) == []


def test_a_released_name_is_free_and_namespaces_are_apart() -> None:
    claims = NameClaims()
    claims.claim(("a", "x"), [manifest("Service", "s", "a")])
    assert claims.claim(("b", "y"), [manifest("Service", "s", "b")]) == []
    claims.release(("Service", "a", "s"))
    assert claims.claim(("a", "z"), [manifest("Service", "s", "a")]) == []
