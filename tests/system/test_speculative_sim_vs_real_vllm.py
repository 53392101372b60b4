"""The simulator's spec-decode series against a REAL vLLM CPU engine running n-gram
speculation (`--speculative-config '{"method":"ngram",...}'` on the tiny model).

Both get the same completions (a prompt that repeats itself, so the n-gram proposer finds
matches); every `vllm:spec_decode_*` family the simulator exports must exist in the real
engine with the same type and label names, and the other way round; both count drafts,
K draft tokens per draft and accepted tokens within them, the way vLLM's SpecDecodingStats
does (accepted <= draft tokens = K x drafts).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.support.metric_families import families
from tests.support.real_vllm import RealVllm, engines_python, make_tiny_model
from tests.support.sims import SimProcess

pytestmark = [pytest.mark.system, pytest.mark.engines]

K = 3
CONFIG = (
    f'{{"method":"ngram","num_speculative_tokens":{K},"prompt_lookup_max":3,"prompt_lookup_min":1}}'
)
PROMPT = " ".join(["the quick brown fox jumps over the lazy dog"] * 3)


@pytest.fixture(scope="module")
def real_ngram(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RealVllm]:
    work = tmp_path_factory.mktemp("spec-ngram")
    python = engines_python()
    engine = RealVllm(
        model_dir=make_tiny_model(python, work / "tiny-llama"),
        log_path=work / "vllm-ngram.log",
        extra_args=("--speculative-config", CONFIG),
    )
    engine.start(python)
    try:
        # Speculative decoding compiles the n-gram proposer too: slower to start on a CPU.
        engine.wait_ready(timeout=600)
        yield engine
    finally:
        engine.stop()


def _complete(url: str, model: str) -> None:
    body = {"model": model, "prompt": PROMPT, "max_tokens": 24, "temperature": 0,
            "ignore_eos": True}  # fmt: skip
    answer = httpx.post(f"{url}/v1/completions", json=body, timeout=300)
    assert answer.status_code == 200, answer.text


def _totals(text: str) -> dict[str, float]:
    out: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name.startswith("vllm:spec_decode") and sample.name.endswith("_total"):
                out[sample.name] = out.get(sample.name, 0.0) + sample.value
    return out


def test_spec_decode_families_match_the_real_engine(
    real_ngram: RealVllm, start_sim: Callable[..., SimProcess]
) -> None:
    sim = start_sim(
        "--model", "meta-llama/Llama-3.1-8B", "--gpu", "l4",
        "--max-model-len", str(real_ngram.max_model_len),
        "--served-model-name", real_ngram.served_name,
        "--time-scale", "100", "--speculative-config", CONFIG,
    )  # fmt: skip
    for _ in range(3):
        _complete(real_ngram.base_url, real_ngram.served_name)
        _complete(sim.base_url, real_ngram.served_name)
    real_text = httpx.get(f"{real_ngram.base_url}/metrics", timeout=30).text
    sim_text = httpx.get(f"{sim.base_url}/metrics", timeout=30).text
    mine = {n: f for n, f in families(sim_text).items() if n.startswith("vllm:spec_decode")}
    theirs = {n: f for n, f in families(real_text).items() if n.startswith("vllm:spec_decode")}
    assert set(mine) == set(theirs), (sorted(mine), sorted(theirs))
    counters = {n for n, f in mine.items() if f.type == "counter"}
    assert counters == {
        f"vllm:spec_decode_num_{name}"
        for name in ("drafts", "draft_tokens", "accepted_tokens", "accepted_tokens_per_pos")
    }
    for name, family in mine.items():
        assert (family.type, family.labels) == (theirs[name].type, theirs[name].labels), name
    for text in (real_text, sim_text):
        totals = _totals(text)
        drafts = totals["vllm:spec_decode_num_drafts_total"]
        assert drafts > 0
        assert totals["vllm:spec_decode_num_draft_tokens_total"] <= K * drafts
        accepted = totals["vllm:spec_decode_num_accepted_tokens_total"]
        assert 0 <= accepted <= totals["vllm:spec_decode_num_draft_tokens_total"]
        assert totals["vllm:spec_decode_num_accepted_tokens_per_pos_total"] == accepted


def test_the_real_engines_acceptance_reads_back_as_a_rate(real_ngram: RealVllm) -> None:
    # What the autoscaler's query computes (autoscale/signals.py acceptance_query), from the
    # engine's own counters: 1 + accepted / drafts tokens per step, the rate that gives it.
    from tokenfleet.capacity.speculative import expected_tokens, rate_for_length

    _complete(real_ngram.base_url, real_ngram.served_name)
    totals = _totals(httpx.get(f"{real_ngram.base_url}/metrics", timeout=30).text)
    length = (
        1
        + totals["vllm:spec_decode_num_accepted_tokens_total"]
        / totals["vllm:spec_decode_num_drafts_total"]
    )
    rate = rate_for_length(length, K)
    assert 1.0 <= length <= K + 1
    assert expected_tokens(rate, K) == pytest.approx(length, rel=1e-6)
