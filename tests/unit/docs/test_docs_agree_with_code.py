"""What the docs and the chart's notes say the operator does is what the code does: the
Autoscaling condition's reasons, the reason a service without a Prometheus URL shows, the
generated field table of docs/api.md."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tokenfleet.api.crd import open_api_schema
from tokenfleet.api.reference import BEGIN, END, fill, rows
from tokenfleet.controller.autoscaler_status import DATA_HOLDS
from tokenfleet.controller.prometheus_source import NO_URL_MESSAGE

ROOT = Path(__file__).resolve().parents[3]
CONTROLLER = ROOT / "operator" / "src" / "tokenfleet" / "controller"
API_DOC = ROOT / "docs" / "api.md"


def _reasons_in_code() -> set[str]:
    text = "".join(p.read_text() for p in CONTROLLER.glob("*.py"))
    return set(re.findall(r'Condition\(\s*"Autoscaling",\s*[^,]+,\s*"(\w+)"', text))


def test_the_autoscaling_reasons_documented_are_the_ones_the_code_sets() -> None:
    in_code = _reasons_in_code()
    assert {"Disabled", "AwaitingMetrics", "Active", "LimitedAtMax", "Held"} <= in_code
    text = API_DOC.read_text()
    paragraph = text[text.index("`Autoscaling` reasons:") :].split("\n\n", 1)[0]
    documented = set(re.findall(r"`(\w+)`\s+\((?:True|False|Unknown)", paragraph))
    assert documented == in_code
    assert all(f"`{hold}`" in paragraph for hold in DATA_HOLDS)


def test_no_prometheus_url_is_awaiting_metrics_in_the_charts_words_too() -> None:
    """Not PrometheusDown: that hold is for a Prometheus that does not answer."""
    assert "no Prometheus URL" in NO_URL_MESSAGE
    notes = (ROOT / "charts" / "tokenfleet" / "templates" / "NOTES.txt").read_text()
    branch = notes.split("if not .Values.prometheusUrl", 1)[1].split("{{- end }}", 1)[0]
    assert "AwaitingMetrics" in branch and "PrometheusDown" not in branch
    values = (ROOT / "charts" / "tokenfleet" / "values.yaml").read_text()
    comment = values.split('prometheusUrl: ""', 1)[0].rsplit("\n\n", 1)[1]
    assert "AwaitingMetrics" in comment and "PrometheusDown" not in comment


def test_the_api_reference_is_generated_from_the_crd() -> None:
    text = API_DOC.read_text()
    assert fill(text) == text, "docs/api.md is stale: run `tokenfleet crd`"
    table = text.split(BEGIN, 1)[1].split(END, 1)[0]
    for path, *_ in rows(open_api_schema()["properties"]["spec"]):
        assert f"| `{path}` |" in table


def test_fill_needs_its_markers() -> None:
    with pytest.raises(ValueError, match="markers"):
        fill("# no markers here\n")
    filled = fill(f"head\n{BEGIN}\nold table\n{END}\ntail\n")
    assert filled.startswith(f"head\n{BEGIN}\n| field |") and filled.endswith(f"{END}\ntail\n")
    assert "old table" not in filled
