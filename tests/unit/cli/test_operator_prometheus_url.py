"""`tokenfleet operator` refuses a bad --prometheus-url before starting anything."""

from __future__ import annotations

import pytest

from tokenfleet.cli import main


def test_prometheus_url_must_be_http(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["operator", "--prometheus-url", "prometheus:9090", "--metrics-port", "0"]) == 2
    err = capsys.readouterr().err
    assert "--prometheus-url 'prometheus:9090'" in err
    assert "http://prometheus-operated.monitoring:9090" in err


def test_allow_prometheus_must_be_http(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["operator", "--allow-prometheus", "thanos:9090", "--metrics-port", "0"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--allow-prometheus 'thanos:9090'" in err
    assert "not an http(s) URL" in err


@pytest.mark.parametrize(
    ("flag", "url", "problem"),
    [
        ("--allow-prometheus", "http://prom:9090/-/quit?", "has a query"),
        ("--allow-prometheus", "http://admin:pw@prom:9090", "has userinfo"),
        ("--prometheus-url", "http://prom:9090/a/../b", "dot segment"),
    ],
)
def test_an_admins_url_is_parsed_as_strictly_as_a_tenants(
    flag: str, url: str, problem: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["operator", flag, url, "--metrics-port", "0"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"{flag} {url!r}: " in err and problem in err
