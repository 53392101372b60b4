"""spec.autoscaling.prometheus.url is parsed, not matched: each URL form a hostile tenant
tried is refused with the field, the value and the fix, by the CRD's pattern where a regular
expression can say it and by the parser always; an allowed URL becomes requests to the two
query endpoints below the allowed base, and nothing else."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from tokenfleet.api import parse_llmservice
from tokenfleet.api.prometheus_url import (
    FIELD,
    URL_PATTERN,
    PrometheusUrl,
    UrlRefused,
    parse_prometheus_url,
)
from tokenfleet.autoscale.prometheus import PrometheusClient
from tokenfleet.controller.prometheus_source import Allowlist, Refusal
from tokenfleet.errors import UserError

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "llama-3.1-8b-l4-autoscale.yaml"
ALLOWED = "http://prom.monitoring:9090"
SCOPED = "http://thanos.monitoring:9090/tenant-a"

# (url, what the refusal says): every form of the hostile round, and their neighbours.
HOSTILE = [
    (f"{ALLOWED}/-/quit?", "has a query ('?')"),
    (f"{ALLOWED}/api/v1/admin/tsdb/delete_series?match[]=up&x=", "has a query ('?')"),
    (f"{ALLOWED}?", "has a query ('?')"),
    (f"{ALLOWED}/-/quit#", "has a fragment ('#')"),
    (f"{SCOPED}/../tenant-b", "has a dot segment ('..')"),
    (f"{SCOPED}/./x", "has a dot segment ('.')"),
    (f"{ALLOWED}/%2e%2e/-/quit", "percent-encoded"),
    (f"{ALLOWED}/%2F-%2Fquit", "percent-encoded"),
    ("http://admin:secret@prom.monitoring:9090", "has userinfo ('@')"),
    ("http://prom.monitoring:9090@evil.example:80", "has userinfo ('@')"),
    (f"{ALLOWED}/x\r\nX-Injected: 1", "control character ('\\r')"),
    (f"{ALLOWED}\n", "control character ('\\n')"),
    (f"{ALLOWED}/a b", "a space"),
    (f"{ALLOWED}\t", "control character ('\\t')"),
    (f"{ALLOWED}/caf\u00e9", "non-ASCII"),
    ("http://prom.monitoring:9090\\@evil", "a backslash"),
    (f"{ALLOWED}//-/quit", "empty path segment"),
    ("http://prom.monitoring:90901", "port '90901' is not 1-65535"),
    ("http://prom.monitoring:0", "port '0' is not 1-65535"),
    ("http://prom_monitoring:9090", "is not a DNS name"),
    ("prom.monitoring:9090", "not an http(s) URL"),
    ("file:///etc/passwd", "not an http(s) URL"),
    (f"{ALLOWED}/a;b", "path segment 'a;b' has ';'"),
]
GOOD = [
    (ALLOWED, "http://prom.monitoring:9090"),
    (ALLOWED + "/", "http://prom.monitoring:9090"),
    ("HTTP://Prom.Monitoring:9090/prometheus/", "http://prom.monitoring:9090/prometheus"),
    ("https://prom.monitoring", "https://prom.monitoring:443"),
    ("http://10.0.0.7:9090", "http://10.0.0.7:9090"),
    ("http://[fd00::7]:9090/x", "http://[fd00::7]:9090/x"),
    (f"{SCOPED}/.well-known/..x", f"{SCOPED}/.well-known/..x"),  # not dot segments
]
# The pattern cannot check that an IPv6 literal is one: the parser refuses at reconcile.
PARSER_ONLY = [("http://[::::::::]:9090", "not an IPv6 address")]


@pytest.mark.parametrize(("url", "problem"), HOSTILE + PARSER_ONLY)
def test_each_hostile_form_is_refused_naming_field_value_and_fix(url: str, problem: str) -> None:
    with pytest.raises(UrlRefused) as refused:
        parse_prometheus_url(url)
    message = str(refused.value)
    assert message.startswith(f"{FIELD} {url!r}: ")
    assert problem in message
    assert "\n" not in message and "\r" not in message  # one line, whatever the value holds
    assert refused.value.fix  # and what to write instead


@pytest.mark.parametrize(("url", "canonical"), GOOD)
def test_plain_base_urls_parse_to_one_canonical_form(url: str, canonical: str) -> None:
    assert str(parse_prometheus_url(url)) == canonical


@pytest.mark.parametrize(
    ("url", "admitted"),
    [(url, False) for url, _ in HOSTILE] + [(url, True) for url, _ in GOOD + PARSER_ONLY],
)
def test_the_crd_pattern_refuses_at_admission_what_a_pattern_can(url: str, admitted: bool) -> None:
    assert bool(re.fullmatch(URL_PATTERN, url)) is admitted


def llmservice(url: str) -> dict[str, Any]:
    body: dict[str, Any] = yaml.safe_load(EXAMPLE.read_text())
    body["spec"]["autoscaling"]["prometheus"] = {"url": url}
    return body


@pytest.mark.parametrize(("url", "problem"), HOSTILE[:12])
def test_the_operator_refuses_the_spec_with_the_parsers_reason(url: str, problem: str) -> None:
    """An object that slipped past admission (an older CRD) is Degraded with this line."""
    with pytest.raises(ValueError) as refused:
        parse_llmservice(llmservice(url))
    message = str(refused.value)
    assert message.startswith(f"{FIELD}=") and problem in message
    with pytest.raises(UrlRefused) as parsed:
        parse_prometheus_url(url)
    assert message.endswith(f"; {parsed.value.fix}")  # the parser's fix, word for word


def test_the_allowlist_compares_origin_and_whole_path_segments() -> None:
    allow = Allowlist.of([ALLOWED, SCOPED])
    below = parse_prometheus_url(f"{SCOPED}/x")
    assert allow.resolve(below) == PrometheusUrl("http", "thanos.monitoring", 9090, "/tenant-a/x")
    for url in (
        "http://thanos.monitoring:9090/tenant-ab",  # a string prefix, not a segment one
        "http://thanos.monitoring:9090/tenant-b",
        "http://thanos.monitoring:9091/tenant-a",
        "https://prom.monitoring:9090",
        "http://prom.monitoring.evil:9090",
    ):
        assert allow.resolve(parse_prometheus_url(url)) is None, url
    assert allow.resolve(parse_prometheus_url("http://PROM.monitoring:9090/")) is not None


def test_a_refused_spec_url_is_a_refusal_with_the_allowed_list() -> None:
    allow = Allowlist.of([ALLOWED])
    refusal = allow.target("http://kube-apiserver:443", None)
    assert isinstance(refusal, Refusal) and ALLOWED in refusal.message
    hostile = allow.target(f"{ALLOWED}/-/quit?", None)  # an object admission never saw
    assert isinstance(hostile, Refusal) and "has a query" in hostile.message
    assert allow.target(None, ALLOWED) == parse_prometheus_url(ALLOWED)


@pytest.mark.parametrize("entry", [f"{ALLOWED}/-/quit?", "http://u@prom:9090", "prom:9090"])
def test_an_allowlist_entry_is_parsed_as_strictly(entry: str) -> None:
    with pytest.raises(UrlRefused, match="--allow-prometheus"):
        Allowlist.of([entry])


async def test_requests_go_only_to_the_query_endpoints_below_the_base() -> None:
    seen: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(str(request.url))
        data = {"resultType": "vector", "result": [{"metric": {}, "value": [1, "1"]}]}
        return httpx.Response(200, json={"status": "success", "data": data})

    base = Allowlist.of([SCOPED]).resolve(parse_prometheus_url(f"{SCOPED}/-/quit"))
    assert base is not None
    client = PrometheusClient(base, transport=httpx.MockTransport(handler), retries=0)
    await client.query("up")
    await client.query_range("up", 0.0, 60.0, 15.0)
    await client.close()
    assert seen == [
        "http://thanos.monitoring:9090/tenant-a/-/quit/api/v1/query",
        "http://thanos.monitoring:9090/tenant-a/-/quit/api/v1/query_range",
    ]
    with pytest.raises(ValueError, match="not a Prometheus query endpoint"):
        base.endpoint_path("/-/quit")


def test_a_refused_url_is_a_user_error_on_one_line_with_the_url_quoted() -> None:
    """The CLI and the status print every UserError as one line (exit 2 in the CLI): a
    refused URL is one, and its line shows the tenant's string escaped, never raw."""
    hostile = f"{ALLOWED}/tenant-a\r\nX-Injected: 1"
    with pytest.raises(UserError) as refused:
        parse_prometheus_url(hostile)
    line = str(refused.value)
    assert "\n" not in line and "\r" not in line
    assert line.startswith(f"{FIELD} {hostile!r}: ")
    assert isinstance(refused.value, UrlRefused)
    assert (refused.value.field, refused.value.value) == (FIELD, hostile)
