"""The chart's Grafana dashboard: the JSON loads, carries the sidecar label, shows what the
issue asks for, and every PromQL in it parses and runs on the real test Prometheus."""

from __future__ import annotations

import json

from tests.support.chart_render import of_kind, render
from tests.support.prometheus import Prometheus

VALUES = {"grafanaDashboard": {"enabled": True}}
# Grafana's variables, as a user would pick them (the query must parse with real values).
VARIABLES = {
    "$__rate_interval": "5m",
    "$namespace": "team-a",
    "$llmservice": ".+",
    "$ttft_slo": "1.0",
}


def dashboard() -> dict[str, object]:
    (cm,) = of_kind(render(VALUES), "ConfigMap")
    assert cm["metadata"]["labels"]["grafana_dashboard"] == "1"
    return dict(json.loads(cm["data"]["tokenfleet.json"]))


def queries() -> list[str]:
    out = []
    for panel in dashboard()["panels"]:  # type: ignore[attr-defined]
        for target in panel["targets"]:
            expr = target["expr"]
            for name, value in VARIABLES.items():
                expr = expr.replace(name, value)
            out.append(expr)
    return out


def test_dashboard_shows_each_view_per_llmservice() -> None:
    titles = " / ".join(p["title"] for p in dashboard()["panels"])  # type: ignore[attr-defined]
    for needle in ("TTFT quantiles", "attainment", "Goodput", "desired vs ready", "Queue",
                   "KV cache", "predicted vs observed"):  # fmt: skip
        assert needle in titles
    for expr in queries():
        assert "llmservice" in expr  # every panel is per LLMService


def test_every_query_parses_and_runs_on_prometheus(prometheus: Prometheus) -> None:
    exprs = queries()
    assert len(exprs) >= 10
    for expr in exprs:
        prometheus.query(expr)  # raises with Prometheus' parse error on a bad query


def test_a_broken_query_is_caught(prometheus: Prometheus) -> None:
    try:
        prometheus.query("sum by (llmservice) (rate(vllm:num_requests_waiting[5m])")
    except AssertionError as error:
        assert "parse error" in str(error)
    else:
        raise AssertionError("Prometheus accepted an unbalanced query")
