"""The chart's PrometheusRule through the real promtool: `check rules`, then `test rules`
with input series for every alert, once where it must fire and once where it must not.

Engine series carry the labels each LLMService's PodMonitor relabels onto them
(llmservice, namespace, pod); operator series carry namespace / llmservice (honorLabels).
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support.chart_render import of_kind, render

VALUES = {"prometheusRule": {"enabled": True}}  # TTFT SLO 1.0 s, objective 0.99, burn 14.4
ALERTS = {
    "TokenfleetTTFTBudgetBurn",
    "TokenfleetReplicasPinnedAtMax",
    "TokenfleetAutoscalerHeld",
    "TokenfleetReconcileErrors",
}
SVC = 'llmservice="chat", namespace="team-a"'


def promtool() -> str:
    found = shutil.which("promtool")
    if found is None:
        pytest.fail("promtool missing: run `make prometheus`", pytrace=False)
    return found


def rules_file(tmp_path: Path) -> Path:
    (rule,) = of_kind(render(VALUES), "PrometheusRule")
    path = tmp_path / "rules.yaml"
    path.write_text(yaml.safe_dump({"groups": rule["spec"]["groups"]}, sort_keys=False))
    return path


def ttft(
    pod: str, total_per_min: int, good_per_min: int, engine: str = "vllm"
) -> list[dict[str, str]]:
    """Cumulative TTFT histogram series of one pod: `total_per_min` requests a minute, of
    which `good_per_min` within 1 s."""
    labels = f'{SVC}, pod="{pod}"'
    name = f"{engine}:time_to_first_token_seconds"
    return [
        {"series": f'{name}_bucket{{{labels}, le="1.0"}}', "values": f"0+{good_per_min}x120"},
        {"series": f'{name}_bucket{{{labels}, le="+Inf"}}', "values": f"0+{total_per_min}x120"},
        {"series": f"{name}_count{{{labels}}}", "values": f"0+{total_per_min}x120"},
    ]


def case(series: list[dict[str, str]], alert: str, fires: list[dict[str, str]]) -> dict[str, Any]:
    return {
        "interval": "1m",
        "input_series": series,
        "alert_rule_test": [
            {
                "eval_time": "90m",
                "alertname": alert,
                "exp_alerts": [{"exp_labels": labels} for labels in fires],
            }
        ],
    }


BURN = {"llmservice": "chat", "namespace": "team-a", "severity": "critical"}
PINNED = {"llmservice": "chat", "namespace": "team-a", "severity": "warning"}
HELD = {"llmservice": "chat", "namespace": "team-a", "reason": "NoData", "severity": "warning"}
ERRORS = {"code": "5xx", "severity": "warning"}


def at_max(value: int) -> dict[str, str]:
    return {"series": f"tokenfleet_autoscaler_at_max{{{SVC}}}", "values": f"{value}x120"}


def held(reason: str, value: int) -> dict[str, str]:
    labels = f'{SVC}, reason="{reason}"'
    return {"series": f"tokenfleet_autoscaler_held{{{labels}}}", "values": f"{value}x120"}


CASES = {
    # 30% of requests miss 1 s: 30x the 1% budget, above 14.4.
    "burn fires": case(
        ttft("p0", 100, 70) + ttft("p1", 100, 70), "TokenfleetTTFTBudgetBurn", [BURN]
    ),
    # SGLang's series count too.
    "burn fires on sglang": case(ttft("p0", 100, 70, "sglang"), "TokenfleetTTFTBudgetBurn", [BURN]),
    # 5% miss: over budget, yet below the paging burn rate.
    "burn quiet": case(ttft("p0", 100, 95), "TokenfleetTTFTBudgetBurn", []),
    "burn quiet without traffic": case(ttft("p0", 0, 0), "TokenfleetTTFTBudgetBurn", []),
    "pinned fires": case(
        [*ttft("p0", 100, 90), at_max(1)], "TokenfleetReplicasPinnedAtMax", [PINNED]
    ),
    "pinned quiet below max": case(
        [*ttft("p0", 100, 90), at_max(0)], "TokenfleetReplicasPinnedAtMax", []
    ),
    "pinned quiet when the SLO is met": case(
        [*ttft("p0", 100, 100), at_max(1)], "TokenfleetReplicasPinnedAtMax", []
    ),
    "held fires": case(
        [held("NoData", 1), held("StaleData", 0)], "TokenfleetAutoscalerHeld", [HELD]
    ),
    "held quiet": case([held("NoData", 0), held("StaleData", 0)], "TokenfleetAutoscalerHeld", []),
    "errors fire": case(
        [{"series": 'tokenfleet_reconcile_errors_total{code="5xx"}', "values": "0+3x120"}],
        "TokenfleetReconcileErrors",
        [ERRORS],
    ),
    "errors quiet": case(
        [{"series": 'tokenfleet_reconcile_errors_total{code="5xx"}', "values": "7x120"}],
        "TokenfleetReconcileErrors",
        [],
    ),
}


def test_promtool_check_rules(tmp_path: Path) -> None:
    proc = subprocess.run(
        [promtool(), "check", "rules", str(rules_file(tmp_path))], capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (rule,) = of_kind(render(VALUES), "PrometheusRule")
    alerts = {r["alert"] for g in rule["spec"]["groups"] for r in g["rules"] if "alert" in r}
    assert alerts == ALERTS


def test_every_alert_has_a_firing_and_a_quiet_case() -> None:
    fires = {
        c["alert_rule_test"][0]["alertname"]
        for c in CASES.values()
        if c["alert_rule_test"][0]["exp_alerts"]
    }
    quiet = {
        c["alert_rule_test"][0]["alertname"]
        for c in CASES.values()
        if not c["alert_rule_test"][0]["exp_alerts"]
    }
    assert fires == quiet == ALERTS


# $value of a firing alert as humanizePercentage prints it (the burn cases: 30% missed).
VALUES_SHOWN = {"TokenfleetTTFTBudgetBurn": "30%"}


def with_annotations(test: dict[str, Any]) -> dict[str, Any]:
    """promtool compares annotations too: expand the rule's templates for each expected
    alert (labels and $value; the templates are the chart's, the values ours)."""
    (rule,) = of_kind(render(VALUES), "PrometheusRule")
    by_name = {r["alert"]: r for g in rule["spec"]["groups"] for r in g["rules"] if "alert" in r}
    check = test["alert_rule_test"][0]
    for expected in check["exp_alerts"]:
        labels = expected["exp_labels"]
        out = {}
        for key, text in by_name[check["alertname"]].get("annotations", {}).items():
            shown = VALUES_SHOWN.get(check["alertname"], "")
            text = text.replace("{{ $value | humanizePercentage }}", shown)
            for name, value in labels.items():
                text = text.replace(f"{{{{ $labels.{name} }}}}", value)
            out[key] = text
        expected["exp_annotations"] = out
    return test


@pytest.mark.parametrize("name", sorted(CASES))
def test_promtool_test_rules(name: str, tmp_path: Path) -> None:
    rules = rules_file(tmp_path)
    tests = tmp_path / "tests.yaml"
    tests.write_text(
        yaml.safe_dump(
            {
                "rule_files": [str(rules)],
                "evaluation_interval": "1m",
                "tests": [with_annotations(CASES[name])],
            }
        )
    )
    proc = subprocess.run([promtool(), "test", "rules", str(tests)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_promtool_test_rules_can_fail(tmp_path: Path) -> None:
    """A quiet case claimed to fire fails: the cases above are real checks."""
    rules = rules_file(tmp_path)
    wrong = with_annotations(case(ttft("p0", 100, 95), "TokenfleetTTFTBudgetBurn", [BURN]))
    tests = tmp_path / "tests.yaml"
    tests.write_text(
        yaml.safe_dump({"rule_files": [str(rules)], "evaluation_interval": "1m", "tests": [wrong]})
    )
    proc = subprocess.run([promtool(), "test", "rules", str(tests)], capture_output=True, text=True)
    assert proc.returncode != 0
