"""Report layout and --save-result keys follow `vllm bench serve`."""

from __future__ import annotations

import math

from tokenfleet.bench.aggregate import RequestOutput, aggregate
from tokenfleet.bench.report import RunInfo, default_result_filename, format_report, result_json

# Keys `vllm bench serve --save-result` writes for a generation benchmark (default metrics
# ttft,tpot,itl + e2el here, default percentile 99).
VLLM_KEYS = {
    "date", "endpoint_type", "backend", "label", "model_id", "tokenizer_id", "num_prompts",
    "request_rate", "burstiness", "max_concurrency", "duration", "completed", "failed",
    "total_input_tokens", "total_output_tokens", "request_throughput", "request_goodput",
    "output_throughput", "total_token_throughput", "input_lens", "output_lens", "ttfts",
    "itls", "errors", "max_output_tokens_per_s", "max_concurrent_requests",
    "mean_ttft_ms", "median_ttft_ms", "std_ttft_ms", "p99_ttft_ms",
    "mean_tpot_ms", "median_tpot_ms", "std_tpot_ms", "p99_tpot_ms",
    "mean_itl_ms", "median_itl_ms", "std_itl_ms", "p99_itl_ms",
    "mean_e2el_ms", "median_e2el_ms", "std_e2el_ms", "p99_e2el_ms",
}  # fmt: skip


def _run(goodput: dict[str, float], rate: float = math.inf, conc: int | None = None):
    outputs = [
        RequestOutput(10, True, 3, 0.1, [0.02, 0.02], 0.14, 0.0),
        RequestOutput(12, True, 3, 0.2, [0.03, 0.03], 0.26, 0.1),
    ]
    info = RunInfo(
        backend="openai",
        model_id="org/tiny",
        num_prompts=2,
        request_rate=rate,
        burstiness=1.0,
        max_concurrency=conc,
        percentile_metrics=("ttft", "tpot", "itl", "e2el"),
        goodput_slo_ms=goodput,
        date="20260101-000000",
    )
    metrics = aggregate(outputs, 1.0, (50.0, 99.0), goodput)
    return info, metrics, outputs


def test_json_has_vllm_keys() -> None:
    info, metrics, outputs = _run({})
    doc = result_json(info, metrics, outputs, detailed=False)
    assert set(doc) >= VLLM_KEYS
    assert {"p50_ttft_ms", "p50_e2el_ms"} <= set(doc)
    assert doc["request_goodput"] is None  # as vLLM: only set when --goodput is given
    assert doc["request_rate"] == "inf"
    assert doc["input_lens"] == [10, 12]
    assert doc["output_lens"] == [3, 3]
    assert "generated_texts" not in doc
    assert "generated_texts" in result_json(info, metrics, outputs, detailed=True)


def test_report_lines_follow_vllm_labels() -> None:
    info, metrics, _ = _run({"ttft": 150}, rate=4.0, conc=8)
    text = format_report(info, metrics)
    lines = text.splitlines()
    assert lines[0] == "============ Serving Benchmark Result ============"
    assert lines[-1] == "=" * 50
    for label in [
        "Successful requests:",
        "Failed requests:",
        "Maximum request concurrency:",
        "Request rate configured (RPS):",
        "Benchmark duration (s):",
        "Total input tokens:",
        "Total generated tokens:",
        "Request throughput (req/s):",
        "Request goodput (req/s):",
        "Output token throughput (tok/s):",
        "Peak output token throughput (tok/s):",
        "Peak concurrent requests:",
        "Total Token throughput (tok/s):",
        "Mean TTFT (ms):",
        "Median TPOT (ms):",
        "P99 ITL (ms):",
        "P50 E2EL (ms):",
    ]:
        assert any(line.startswith(label) for line in lines), label
    assert "---------------Time to First Token----------------" in lines
    assert "Successful requests:                     2         " in lines
    assert "Request goodput (req/s):                 1.00      " in lines


def test_report_omits_what_was_not_configured() -> None:
    info, metrics, _ = _run({})
    text = format_report(info, metrics)
    assert "Request goodput" not in text
    assert "Request rate configured" not in text
    assert "Maximum request concurrency" not in text


def test_default_filename_like_vllm() -> None:
    info, _, _ = _run({}, rate=2.0, conc=4)
    assert default_result_filename(info) == "openai-2.0qps-concurrency4-tiny-20260101-000000.json"
