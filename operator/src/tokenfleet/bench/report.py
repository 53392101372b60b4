"""Text report and --save-result JSON in `vllm bench serve`'s layout and keys (pure).

Keeping vLLM's labels and JSON keys lets dashboards and scripts written for
`vllm bench serve --save-result` read tokenfleet's results unchanged.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from tokenfleet.bench.aggregate import BenchmarkMetrics, RequestOutput

SECTIONS: dict[str, tuple[str, str]] = {
    "ttft": ("TTFT", "Time to First Token"),
    "tpot": ("TPOT", "Time per Output Token (excl. 1st token)"),
    "itl": ("ITL", "Inter-token Latency"),
    "e2el": ("E2EL", "End-to-end Latency"),
}


@dataclass(frozen=True, slots=True)
class RunInfo:
    """The run's settings that the report and the JSON echo back."""

    backend: str
    model_id: str
    num_prompts: int | None
    request_rate: float
    burstiness: float
    max_concurrency: int | None
    percentile_metrics: tuple[str, ...]
    goodput_slo_ms: dict[str, float]
    label: str | None = None
    date: str = ""


def _p_word(p: float) -> str:
    return str(int(p)) if int(p) == p else str(p)


def _row(label: str, value: object, fmt: str = "") -> str:
    return f"{label:<40} {value:<10{fmt}}"


def format_report(info: RunInfo, m: BenchmarkMetrics) -> str:
    """The human report, line for line like vLLM's."""
    lines = [f"{' Serving Benchmark Result ':=^50}"]
    lines.append(_row("Successful requests:", m.completed))
    lines.append(_row("Failed requests:", m.failed))
    if info.max_concurrency is not None:
        lines.append(_row("Maximum request concurrency:", info.max_concurrency))
    if not math.isinf(info.request_rate):
        lines.append(_row("Request rate configured (RPS):", info.request_rate, ".2f"))
    lines.append(_row("Benchmark duration (s):", m.duration, ".2f"))
    lines.append(_row("Total input tokens:", m.total_input))
    lines.append(_row("Total generated tokens:", m.total_output))
    lines.append(_row("Request throughput (req/s):", m.request_throughput, ".2f"))
    if info.goodput_slo_ms:
        lines.append(_row("Request goodput (req/s):", m.request_goodput, ".2f"))
    lines.append(_row("Output token throughput (tok/s):", m.output_throughput, ".2f"))
    lines.append(_row("Peak output token throughput (tok/s):", m.max_output_tokens_per_s, ".2f"))
    lines.append(_row("Peak concurrent requests:", float(m.max_concurrent_requests), ".2f"))
    lines.append(_row("Total Token throughput (tok/s):", m.total_token_throughput, ".2f"))
    for key in info.percentile_metrics:
        short, header = SECTIONS[key]
        d = m.distributions[key]
        lines.append(f"{header:-^50}")
        lines.append(_row(f"Mean {short} (ms):", d.mean, ".2f"))
        lines.append(_row(f"Median {short} (ms):", d.median, ".2f"))
        for p, value in d.percentiles:
            lines.append(_row(f"P{_p_word(p)} {short} (ms):", value, ".2f"))
    lines.append("=" * 50)
    return "\n".join(lines)


def result_json(
    info: RunInfo,
    m: BenchmarkMetrics,
    outputs: list[RequestOutput],
    detailed: bool,
) -> dict[str, Any]:
    """The --save-result document with vLLM's keys.

    Per-request lists (input_lens, output_lens, ttfts, itls, errors) are always written, as
    vLLM's benchmark_serving.py did, because dashboards plot them; generated_texts only with
    --save-detailed since they dominate the file size.
    """
    result: dict[str, Any] = {
        "date": info.date,
        "endpoint_type": info.backend,
        "backend": info.backend,
        "label": info.label,
        "model_id": info.model_id,
        "tokenizer_id": info.model_id,
        "num_prompts": info.num_prompts,
        "request_rate": "inf" if math.isinf(info.request_rate) else info.request_rate,
        "burstiness": info.burstiness,
        "max_concurrency": info.max_concurrency,
        "duration": m.duration,
        "completed": m.completed,
        "failed": m.failed,
        "total_input_tokens": m.total_input,
        "total_output_tokens": m.total_output,
        "request_throughput": m.request_throughput,
        "request_goodput": m.request_goodput if info.goodput_slo_ms else None,
        "output_throughput": m.output_throughput,
        "total_token_throughput": m.total_token_throughput,
        "input_lens": [o.prompt_len for o in outputs],
        "output_lens": list(m.output_lens),
        "ttfts": [o.ttft for o in outputs],
        "itls": [o.itl for o in outputs],
        "errors": [o.error for o in outputs],
        "max_output_tokens_per_s": m.max_output_tokens_per_s,
        "max_concurrent_requests": m.max_concurrent_requests,
    }
    if detailed:
        result["generated_texts"] = [o.generated_text for o in outputs]
    for key in info.percentile_metrics:
        d = m.distributions[key]
        result[f"mean_{key}_ms"] = d.mean
        result[f"median_{key}_ms"] = d.median
        result[f"std_{key}_ms"] = d.std
        for p, value in d.percentiles:
            result[f"p{_p_word(p)}_{key}_ms"] = value
    return result


def default_result_filename(info: RunInfo) -> str:
    """vLLM's default name: {label}-{rate}qps[-concurrencyN]-{model}-{date}.json."""
    concurrency = f"-concurrency{info.max_concurrency}" if info.max_concurrency else ""
    base_model = info.model_id.split("/")[-1]
    label = info.label or info.backend
    return f"{label}-{info.request_rate}qps{concurrency}-{base_model}-{info.date}.json"
