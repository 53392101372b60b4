"""`tokenfleet plan --serving`: the JSON contract of a serving decision, the role commands,
the table's lines, and the one-line refusals of flags that only mean something with roles."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tokenfleet.cli import main

HEAVY = ["--model", "meta-llama/Llama-3.1-70B", "--quantization", "fp8", "--gpu", "h100-sxm",
         "--input-tokens", "3000", "--output-tokens", "150", "--ttft-slo-ms", "2000"]  # fmt: skip


def _json(capsys: pytest.CaptureFixture[str], *argv: str) -> dict[str, Any]:
    assert main(["plan", *argv, "-o", "json"]) == 0
    return dict(json.loads(capsys.readouterr().out))


def test_auto_json_carries_the_decision_and_both_roles(capsys: pytest.CaptureFixture[str]) -> None:
    doc = _json(capsys, *HEAVY, "--serving", "auto")
    s = doc["serving"]
    assert s["asked"] == "auto" and s["mode"] == "disaggregated"
    d = s["disaggregated"]
    assert d["prefill"]["role"] == "prefill" and d["decode"]["role"] == "decode"
    assert d["kvLink"]["kind"] == "network" and d["kvTransferMs"] > 0
    prefill, decode = d["prefill"]["engineCommand"], d["decode"]["engineCommand"]
    assert '"kv_role":"kv_producer"' in prefill[prefill.index("--kv-transfer-config") + 1]
    policy = decode[decode.index("--kv-transfer-config") + 1]
    assert '"kv_load_failure_policy":"recompute"' in policy
    assert doc["engineCommand"] == decode  # the plan is the decode role's
    assert doc["tensorParallelSize"] == d["decode"]["tensorParallelSize"]


def test_table_shows_roles_transfer_and_both_commands(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", *HEAVY, "--serving", "auto", "--target-rps", "20"]) == 0
    out = capsys.readouterr().out
    assert "serving       disaggregated (asked: auto)" in out
    assert "KV transfer" in out and "TTFT        p95" in out
    assert "fleets        for 20 req/s within the SLO, both kinds" in out
    assert "disaggregated  " in out and "aggregated     " in out
    assert "  prefill       vllm serve" in out and "  decode        vllm serve" in out


def test_a_slower_link_costs_transfer_time(capsys: pytest.CaptureFixture[str]) -> None:
    fast = _json(capsys, *HEAVY, "--serving", "disaggregated", "--prefill-tp", "4",
                 "--decode-tp", "4")  # fmt: skip
    slow = _json(capsys, *HEAVY, "--serving", "disaggregated", "--prefill-tp", "4",
                 "--decode-tp", "4", "--kv-network-gbps", "25")  # fmt: skip
    t = lambda doc: doc["serving"]["disaggregated"]["kvTransferMs"]  # noqa: E731
    assert t(slow) > 10 * (t(fast) - 2)  # 16x slower link, less the fixed hand-off


@pytest.mark.parametrize(
    ("argv", "flag"),
    [
        (["--prefill-tp", "2"], "prefill-tp"),  # without --serving disaggregated / auto
        (["--kv-network-gbps", "100"], "kv-network-gbps"),
        (["--serving", "disaggregated", "--transfer-backend", "mooncake"], "transfer-backend"),
        (["--serving", "disaggregated", "--kv-link", "nvlink", "--kv-network-gbps", "100"],
         "kv-network-gbps"),
        (["--serving", "disaggregated", "--engine-version", "0.11.0"], "engine-version"),
    ],
)  # fmt: skip
def test_refused_in_one_line(
    capsys: pytest.CaptureFixture[str], argv: list[str], flag: str
) -> None:
    code = main(["plan", "--model", "meta-llama/Llama-3.1-8B", "--gpu", "h100-sxm", *argv])
    err = capsys.readouterr().err
    assert code == 2 and err.startswith(f"error: {flag}=") and err.count("\n") == 1
