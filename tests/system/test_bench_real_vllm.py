"""`tokenfleet bench` against a REAL vLLM CPU engine serving a tiny random-weight Llama.

A random-weight model stops at EOS whenever it happens to sample it, so these runs rely on
`ignore_eos` to get exactly the requested number of tokens; the engine's own /metrics must
then agree with the client's counts.
"""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.support.real_vllm import RealVllm
from tokenfleet.cli import main

pytestmark = [pytest.mark.system, pytest.mark.engines]

NUM_PROMPTS = 8
OUTPUT_LEN = 12


def _vllm_totals(engine: RealVllm) -> dict[str, float]:
    text = httpx.get(f"{engine.base_url}/metrics", timeout=10, trust_env=False).text
    totals: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            totals[s.name] = totals.get(s.name, 0.0) + s.value
    return totals


@pytest.mark.parametrize("endpoint", ["/v1/completions", "/v1/chat/completions"])
def test_bench_reports_sane_numbers_from_a_real_engine(
    real_vllm: RealVllm, tmp_path: Path, endpoint: str
) -> None:
    before = _vllm_totals(real_vllm)
    result_file = tmp_path / "result.json"
    code = main(
        ["bench", "--base-url", real_vllm.base_url, "--endpoint", endpoint,
         "--num-prompts", str(NUM_PROMPTS), "--random-input-len", "32",
         "--random-output-len", str(OUTPUT_LEN), "--max-concurrency", "4",
         "--disable-tqdm", "--save-result", str(result_file)]
    )  # fmt: skip
    assert code == 0
    result = json.loads(result_file.read_text())
    after = _vllm_totals(real_vllm)

    assert result["completed"] == NUM_PROMPTS, result["errors"]
    assert result["failed"] == 0
    assert result["model_id"] == real_vllm.served_name  # discovered from /v1/models
    # ignore_eos: every request generated exactly what it asked for, counted from usage.
    assert result["output_lens"] == [OUTPUT_LEN] * NUM_PROMPTS
    assert result["mean_ttft_ms"] > 0
    # Streaming was parsed chunk by chunk: gaps were recorded between a request's tokens.
    # They may all be ~0: on a busy machine vLLM's server can flush several tokens' events
    # in one network write (a make test run beside another saw 12 tokens arrive at once),
    # and a client timestamps events as they arrive, as `vllm bench serve` does. So they are
    # checked for being measured and ordered, not for being positive.
    assert all(len(itl) >= 1 for itl in result["itls"])
    assert all(gap >= 0 for itl in result["itls"] for gap in itl)
    assert result["mean_tpot_ms"] >= 0 and result["mean_itl_ms"] >= 0
    assert result["mean_e2el_ms"] >= result["mean_ttft_ms"]
    # The engine agrees: same requests, same prompt tokens (usage), same generated tokens.
    assert after["vllm:request_success_total"] - before.get(
        "vllm:request_success_total", 0.0
    ) == pytest.approx(NUM_PROMPTS)
    assert after["vllm:prompt_tokens_total"] - before.get(
        "vllm:prompt_tokens_total", 0.0
    ) == pytest.approx(result["total_input_tokens"])
    assert after["vllm:generation_tokens_total"] - before.get(
        "vllm:generation_tokens_total", 0.0
    ) == pytest.approx(result["total_output_tokens"])
