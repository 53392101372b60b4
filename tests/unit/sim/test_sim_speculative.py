"""The simulator with speculative decoding: its step timer runs the proposer's rounds, and it
exports the engines' spec-decode series under their names (sim/exporter.py)."""

from __future__ import annotations

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.support.scheduler_runs import run_exported
from tests.support.sim_args import sim_args
from tokenfleet.capacity.speculative import SpeculativeTimer, expected_tokens
from tokenfleet.errors import UserError
from tokenfleet.scheduling.core import Arrival, Scheduler, SimRequest, simulate
from tokenfleet.sim.exporter import SpecDecodeCounts, metrics_for
from tokenfleet.sim.setup import settings_from_args

NGRAM = '{"method":"ngram","num_speculative_tokens":3,"prompt_lookup_max":3}'


def test_the_sim_times_steps_with_the_proposers_rounds() -> None:
    settings, timer, summary = settings_from_args(
        sim_args("--speculative-config", NGRAM, "--speculative-acceptance-rate", "0.6")
    )
    assert isinstance(timer, SpeculativeTimer)
    assert settings.speculative == (3, 0.6)
    assert "speculative=ngram k=3" in summary
    _, plain, _ = settings_from_args(sim_args())
    assert timer.step_seconds(0, 8, 8 * 1000) < plain.step_seconds(0, 8, 8 * 1000)


def test_a_rate_without_a_config_is_refused() -> None:
    with pytest.raises(UserError) as info:
        settings_from_args(sim_args("--speculative-acceptance-rate", "0.6"))
    assert info.value.field == "--speculative-acceptance-rate"


def test_counts_follow_the_expected_tokens_per_round() -> None:
    counts = SpecDecodeCounts(3, 0.6)
    counts.decode_tokens(10_000)
    tau = expected_tokens(0.6, 3)
    assert counts.drafts == int(10_000 / tau)
    assert counts.accepted + counts.drafts == pytest.approx(10_000, rel=1e-3)
    assert counts.accepted_at(0) == int(counts.rounds * 0.6)
    assert sum(counts.accepted_at(i) for i in range(3)) == counts.accepted


def _families(engine: str) -> dict[str, tuple[str, set[str], float]]:
    settings, timer, _ = settings_from_args(
        sim_args("--engine", engine, "--speculative-config", NGRAM,
                 "--speculative-acceptance-rate", "0.6")
    )  # fmt: skip
    metrics = metrics_for(engine, "m", 4096, None, settings.speculative)
    scheduler = Scheduler(settings.config, timer)
    for i in range(4):
        scheduler.add(SimRequest(f"r{i}", 100, 50, 0.0))
    run_exported(scheduler, metrics)
    out = {}
    for family in text_string_to_metric_families(metrics.exposition().decode()):
        labels = {k for s in family.samples for k in s.labels}
        total = sum(s.value for s in family.samples if s.name.endswith(("_total", "")) and
                    not s.name.endswith("_created"))  # fmt: skip
        out[family.name] = (family.type, labels, total)
    return out


def test_vllm_spec_decode_counters_have_vllms_names_and_labels() -> None:
    fams = _families("vllm")
    for name in ("drafts", "draft_tokens", "accepted_tokens", "accepted_tokens_per_pos"):
        kind, labels, total = fams[f"vllm:spec_decode_num_{name}"]
        assert kind == "counter" and {"model_name", "engine"} <= labels and total > 0
    assert "position" in fams["vllm:spec_decode_num_accepted_tokens_per_pos"][1]
    drafts = fams["vllm:spec_decode_num_drafts"][2]
    # 4 requests x 49 decode tokens at tau = 1.96 tokens per round.
    assert drafts == int(4 * 49 / expected_tokens(0.6, 3))
    assert fams["vllm:spec_decode_num_draft_tokens"][2] == 3 * drafts


def test_sglang_spec_gauges_say_the_acceptance() -> None:
    fams = _families("sglang")
    assert fams["sglang:spec_accept_length"][2] == pytest.approx(expected_tokens(0.6, 3))
    assert fams["sglang:spec_accept_rate"][2] == pytest.approx((expected_tokens(0.6, 3) - 1) / 3)
    assert fams["sglang:spec_verify_calls"][0] == "counter"


def test_without_speculation_vllm_exports_no_spec_series() -> None:
    settings, timer, _ = settings_from_args(sim_args())
    metrics = metrics_for("vllm", "m", 4096)
    text = metrics.exposition().decode()
    assert "spec_decode" not in text
    assert simulate(settings.config, timer, [Arrival(0.0, 10, 5)])
