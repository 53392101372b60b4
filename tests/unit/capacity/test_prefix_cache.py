"""Prefix caching in plan(): the prefill work per request shrinks by the hit rate.

Judged against the scheduler run itself, not against numbers chosen here: plan() states
the prefill share p it measured at a hit rate of 0 (saturation with the whole prompt vs a
1-token prompt) and the throughput gain 1 / (1 - p x h) that implies; a separate plan at
hit rate h must show that gain in its own saturation throughput.
"""

from __future__ import annotations

import re

import pytest

from tokenfleet.capacity import PlanRequest, get_gpu, load_model, plan
from tokenfleet.capacity.prefix import max_gain, prefill_share, prefill_tokens
from tokenfleet.cli import main

LLAMA_8B = load_model("meta-llama/Llama-3.1-8B")
PREFILL_HEAVY = {"input_tokens": 8000, "output_tokens": 64, "max_model_len": 16384,
                 "ttft_slo_ms": 2000.0}  # fmt: skip
DECODE_HEAVY = {"input_tokens": 200, "output_tokens": 1000, "max_model_len": 8192}


def _plan(hit: float, tp: int | None = 1, **workload: object):  # type: ignore[no-untyped-def]
    """At a fixed layout by default: the gain is a replica's, so both plans must be the same
    replica (the cost objective may pick another layout once prefill gets cheaper)."""
    return plan(
        PlanRequest(
            arch=LLAMA_8B,
            gpu=get_gpu("h100-sxm"),
            prefix_cache_hit_rate=hit,  # type: ignore[arg-type]
            tensor_parallel_size=tp,
            **workload,
        )
    )


@pytest.mark.parametrize(
    ("tokens", "hit", "expected"),
    [(8000, 0.0, 8000), (8000, 0.5, 4000), (1000, 0.95, 50), (3, 0.5, 2), (10, 0.999, 1)],
)
def test_prefill_tokens(tokens: int, hit: float, expected: int) -> None:
    assert prefill_tokens(tokens, hit) == expected


@pytest.mark.parametrize(
    ("full", "bare", "share"), [(4.0, 8.0, 0.5), (10.0, 10.0, 0.0), (0.0, 5.0, 0.0)]
)
def test_prefill_share(full: float, bare: float, share: float) -> None:
    assert prefill_share(full, bare) == share


def stated(reason: str) -> tuple[float, float]:
    found = re.search(r"prefill is (\d+)% of a replica's work.*rises up to (\d+\.\d+)x", reason)
    assert found, reason
    return int(found.group(1)) / 100, float(found.group(2))


@pytest.mark.parametrize(
    ("workload", "min_share", "max_share", "reached"),
    [(PREFILL_HEAVY, 0.8, 1.0, True), (DECODE_HEAVY, 0.0, 0.5, False)],
    ids=["prefill-heavy", "decode-heavy"],
)
def test_the_gain_follows_the_prefill_share(
    workload: dict[str, object], min_share: float, max_share: float, reached: bool
) -> None:
    base, cached = _plan(0.0, **workload), _plan(0.5, **workload)
    assert "prefix cache" not in base.reason
    share, gain = stated(cached.reason)
    assert min_share <= share <= max_share
    # The share is printed to 1% and the gain to 0.01: together up to 0.015 apart.
    assert gain == pytest.approx(max_gain(share, 0.5), abs=0.02)
    # The plan at h = 0.5 shows the stated gain in its own saturation throughput.
    ratio = (
        cached.predicted.saturation_requests_per_second
        / base.predicted.saturation_requests_per_second
    )
    if reached:  # prefill-bound: the whole bound shows
        assert ratio == pytest.approx(gain, rel=0.1)
    else:  # max-num-seqs bounds the decode-heavy replica: the gain is a ceiling
        assert 1.0 <= ratio <= gain * 1.02
    assert cached.predicted.goodput_requests_per_second > base.predicted.goodput_requests_per_second


def test_the_default_layout_keeps_the_explanation() -> None:
    """The cost objective rewrites the chosen plan's reason; the prefix sentence stays."""
    chosen = _plan(0.5, tp=None, **PREFILL_HEAVY)
    assert "objective cost" in chosen.reason
    stated(chosen.reason)


def test_memory_is_still_planned_on_the_whole_prompt() -> None:
    base, cached = _plan(0.0, **PREFILL_HEAVY), _plan(0.5, **PREFILL_HEAVY)
    assert (cached.kv_cache_tokens, cached.max_model_len, cached.max_num_seqs) == (
        base.kv_cache_tokens, base.max_model_len, base.max_num_seqs,
    )  # fmt: skip


def test_plan_cli_says_so(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["plan", "--model", "meta-llama/Llama-3.1-8B", "--gpu", "h100-sxm",
            "--input-tokens", "8000", "--output-tokens", "64", "--max-model-len", "16384",
            "--ttft-slo-ms", "2000"]  # fmt: skip
    goodput = {}
    for hit in ("0", "0.5"):
        assert main([*argv, "--prefix-hit-rate", hit]) == 0
        out = capsys.readouterr().out
        goodput[hit] = float(re.search(r"goodput capacity\s+([\d.]+)", out).group(1))  # type: ignore[union-attr]
        assert ("prefix cache: 50% of the 8,000-token prompts" in out) == (hit == "0.5")
    assert goodput["0.5"] > goodput["0"]


def test_plan_cli_refuses_a_hit_rate_out_of_bounds(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["plan", "--model", "meta-llama/Llama-3.1-8B", "--gpu", "h100-sxm"]
    assert main([*argv, "--prefix-hit-rate", "1.0"]) == 2
    err = capsys.readouterr().err
    assert "prefix-hit-rate" in err and "0.95" in err and "\n" not in err.strip()
