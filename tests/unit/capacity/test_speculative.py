"""Speculative decoding in the plan (capacity/speculative.py, speculative_plan.py): one test
per rule: the expected-tokens formula and its priors, the memory the proposer takes, the step
cost, the seed formula as the limit the model contains, and the policy that never renders
speculation where it lowers goodput."""

from __future__ import annotations

from dataclasses import replace

import pytest

from tokenfleet.capacity import PlanError, PlanRequest, get_gpu, load_model, plan
from tokenfleet.capacity.speculative import (
    PRIORS,
    SpeculativeRequest,
    SpeculativeTimer,
    crossover_batch,
    expected_tokens,
    rate_for_length,
    seed_speedup,
)
from tokenfleet.capacity.types import GIB
from tokenfleet.engines import Launch, engine_args

LLAMA_8B = load_model("meta-llama/Llama-3.1-8B")
DRAFT_1B = load_model("meta-llama/Llama-3.2-1B")
H100 = get_gpu("h100-sxm")
EAGLE3 = SpeculativeRequest("eagle3", 3, draft_model="yuhuili/EAGLE3-LLaMA3.1-Instruct-8B")
DRAFT = SpeculativeRequest(
    "draft_model", 3, draft=DRAFT_1B, draft_model="meta-llama/Llama-3.2-1B-Instruct"
)


def _req(**kw: object) -> PlanRequest:
    base = PlanRequest(arch=LLAMA_8B, gpu=H100, tensor_parallel_size=1, max_model_len=8192)
    return replace(base, **kw)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("rate", "k", "tokens"),
    [(0.0, 3, 1.0), (1.0, 3, 4.0), (0.5, 1, 1.5), (0.5, 3, 1.875), (0.8, 4, 3.3616)],
)
def test_expected_tokens_is_the_source_formula(rate: float, k: int, tokens: float) -> None:
    assert expected_tokens(rate, k) == pytest.approx(tokens)
    if 0 < rate < 1:
        assert rate_for_length(tokens, k) == pytest.approx(rate, abs=1e-9)


@pytest.mark.parametrize("method", sorted(PRIORS))
def test_each_prior_reproduces_its_published_acceptance_length(method: str) -> None:
    prior = PRIORS[method]  # type: ignore[index]
    assert 0 < prior.rate < 1
    assert expected_tokens(prior.rate, prior.tokens) == pytest.approx(prior.acceptance_length)
    assert prior.source


def test_eagle3_prior_matches_vllms_per_position_rates() -> None:
    # vLLM's baseline also records the share of drafts accepted at each position: 0.7296,
    # 0.5208, 0.3545. The one-rate model gives a, a^2, a^3 for them.
    a = PRIORS["eagle3"].rate
    for measured, position in zip((0.7296, 0.5208, 0.3545), (1, 2, 3), strict=True):
        assert a**position == pytest.approx(measured, rel=0.12)


@pytest.mark.parametrize("engine", ["vllm", "sglang"])
def test_memory_falls_by_the_drafts_weights_and_kv(engine: str) -> None:
    sp = replace(DRAFT, policy="always")
    with_ = plan(_req(engine=engine, speculative=sp))
    bare = plan(_req(engine=engine))
    assert with_.speculative is not None and with_.speculative.enabled
    draft_bytes = with_.memory.draft
    # Llama-3.2-1B: 1.24 B params in bf16, all of it (a draft model shares nothing).
    assert draft_bytes == pytest.approx(DRAFT_1B.params.total * 2, rel=1e-9)
    m, b = with_.memory, bare.memory
    assert m.kv_cache == pytest.approx(b.kv_cache - draft_bytes, abs=1.0)
    assert (m.weights, m.activation, m.budget) == (b.weights, b.activation, b.budget)
    if engine == "vllm":
        # The draft's 16 layers keep KV too: 2 x 8 heads x 64 x 2 B each.
        assert with_.kv_bytes_per_token == bare.kv_bytes_per_token + 16 * 2 * 8 * 64 * 2
        assert with_.kv_cache_tokens == int(m.kv_cache // (with_.kv_bytes_per_token * 16)) * 16
    else:
        # SGLang sizes the draft's cell at the target's per-layer size x its layers.
        assert with_.kv_bytes_per_token == bare.kv_bytes_per_token * (32 + 16) // 32
        assert with_.kv_cache_tokens == int(m.kv_cache // with_.kv_bytes_per_token)
    assert with_.kv_cache_tokens < bare.kv_cache_tokens


def test_eagle_heads_share_the_targets_embedding_and_head() -> None:
    eagle = plan(_req(speculative=replace(EAGLE3, method="eagle", policy="always")))
    eagle3 = plan(_req(speculative=replace(EAGLE3, policy="always")))
    layer = (4096 * 4096 * 2 + 2 * 4096 * 1024 + 3 * 4096 * 14336 + 2 * 4096) * 2
    # EAGLE-1: one decoder layer and its fc (2h -> h); EAGLE-3 adds fc 3h -> h, the wider
    # q/k/v input and its own 32K-token LM head.
    assert eagle.memory.draft == pytest.approx(layer + 2 * 4096 * 4096 * 2, rel=0.01)
    assert eagle3.memory.draft > eagle.memory.draft + 32000 * 4096 * 2
    assert eagle3.memory.draft < 1.0 * GIB


def test_ngram_takes_no_memory() -> None:
    with_ = plan(_req(speculative=SpeculativeRequest("ngram", 3, policy="always")))
    bare = plan(_req())
    assert with_.memory.draft == 0
    assert with_.kv_cache_tokens == bare.kv_cache_tokens


def _timer(method: str, batch_context: int = 2198) -> tuple[SpeculativeTimer, object]:
    from tokenfleet.capacity import planner

    sp = EAGLE3 if method == "eagle3" else SpeculativeRequest("ngram", 3, acceptance_rate=0.7)
    req = _req(speculative=sp)
    ctx = planner._context(req)
    sized = planner._size(ctx, planner._candidates(req, ctx.per_node))
    assert isinstance(sized.step, SpeculativeTimer)
    return sized.step, sized.step.target


def test_seed_formula_is_the_models_limit_at_low_batch() -> None:
    # A free proposer on a memory-bound batch of one: verifying K+1 tokens costs about one
    # decode step, so the speed-up is the source's (1 - a^(K+1)) / (1 - a).
    timer, target = _timer("ngram")
    timer = replace(timer, proposer_s=0.0)
    plain = target.decode_step_seconds(1, 2198)  # type: ignore[attr-defined]
    speedup = plain / timer.decode_token_seconds(1, 2198)
    tau = expected_tokens(0.7, 3)
    assert speedup == pytest.approx(tau, rel=0.03)
    assert speedup <= tau * (1 + 1e-9)


def test_draft_cost_lowers_the_speedup_as_leviathans_formula_says() -> None:
    timer, target = _timer("eagle3")
    assert timer.draft is not None
    plain = target.decode_step_seconds(1, 2198)  # type: ignore[attr-defined]
    c = timer.draft.decode_step_seconds(1, 2198) / plain
    speedup = plain / timer.decode_token_seconds(1, 2198)
    assert 0 < c < 0.2
    assert speedup == pytest.approx(seed_speedup(timer_rate(), 3, c), rel=0.05)
    assert speedup < expected_tokens(timer_rate(), 3)


def timer_rate() -> float:
    return EAGLE3.rate


def test_compute_bound_verification_turns_speculation_into_a_loss() -> None:
    # Short contexts leave a large batch compute-bound: B (K + 1) verified tokens cost more
    # than the tokens they yield. Below the crossover it pays, from it on it does not.
    timer, target = _timer("eagle3")
    context = 256
    cross = crossover_batch(timer, target, context, 1024)  # type: ignore[arg-type]
    assert cross is not None and 16 < cross <= 1024
    for b, pays in ((cross - 1, True), (cross, False)):
        plain = target.decode_step_seconds(b, b * context)  # type: ignore[attr-defined]
        assert (timer.decode_token_seconds(b, context) < plain) is pays


def test_speculation_is_never_rendered_where_it_lowers_goodput() -> None:
    poor = replace(DRAFT, acceptance_rate=0.2)
    p = plan(_req(speculative=poor))
    sp = p.speculative
    assert sp is not None
    assert sp.goodput_with < sp.goodput_without
    assert not sp.enabled
    args = engine_args(p, Launch("meta-llama/Llama-3.1-8B"))
    assert "--speculative-config" not in args
    assert p.predicted.goodput_requests_per_second >= sp.goodput_with
    assert "left off" in p.reason and any("not rendered" in w for w in p.warnings)


def test_speculation_that_pays_is_rendered_and_says_so() -> None:
    p = plan(_req(speculative=EAGLE3, concurrency=4))
    sp = p.speculative
    assert sp is not None and sp.enabled
    assert sp.goodput_with >= sp.goodput_without and sp.tpot_with_ms < sp.tpot_without_ms
    args = engine_args(p, Launch("meta-llama/Llama-3.1-8B"))
    config = args[args.index("--speculative-config") + 1]
    assert '"method":"eagle3"' in config and '"num_speculative_tokens":3' in config
    assert "pays" in p.reason


def test_policy_always_keeps_a_loss_and_warns() -> None:
    p = plan(_req(speculative=replace(DRAFT, acceptance_rate=0.2, policy="always")))
    assert p.speculative is not None and p.speculative.enabled
    assert any("lowers goodput" in w for w in p.warnings)


@pytest.mark.parametrize(
    ("sp", "field", "text"),
    [
        (replace(EAGLE3, num_speculative_tokens=0), "num-speculative-tokens", "1..16"),
        (replace(EAGLE3, acceptance_rate=1.5), "acceptance-rate", "between 0 and 1"),
        (replace(EAGLE3, draft_model=None), "draft-model", "needs the model"),
        (SpeculativeRequest("mtp", 1), "speculative", "num_nextn_predict_layers"),
        (replace(DRAFT, draft=None), "draft-model", "config"),
    ],
)
def test_bad_settings_are_refused_with_field_and_fix(
    sp: SpeculativeRequest, field: str, text: str
) -> None:
    with pytest.raises(PlanError) as info:
        plan(_req(speculative=sp))
    assert info.value.field == field and text in info.value.problem and info.value.fix


def test_mtp_sizes_deepseeks_own_layer() -> None:
    deepseek = load_model("deepseek-ai/DeepSeek-V3")
    assert deepseek.mtp_layers == 1
    req = PlanRequest(
        arch=deepseek, gpu=get_gpu("h200"), tensor_parallel_size=8, max_model_len=8192,
        speculative=SpeculativeRequest("mtp", 1, policy="always"),
    )  # fmt: skip
    p = plan(req)
    assert p.speculative is not None
    # One MoE decoder layer of 61, FP8 like the target: about 1/61 of the weights per GPU.
    assert p.memory.draft == pytest.approx(p.memory.weights / 61, rel=0.35)
