"""The TPOT speed-up of speculative decoding by batch size, beside the seed's formula.

For one sized replica (the layout plan() sizes for the request, proposer included), at each
batch size B:
- seed: tau = (1 - a^(K+1)) / (1 - a), the speed-up if verifying K + 1 tokens cost one decode
  step and drafting cost nothing; Leviathan et al.'s tau / (1 + K c) with c the draft step's
  time over the target's at B;
- step model: a plain decode step over B sequences against SpeculativeTimer's time per token
  (verification of B (K + 1) tokens, the draft's passes, 1 / tau of the round);
- under load: the median TPOT of the scheduler's closed loop at concurrency B, with and
  without the proposer (its KV cache smaller by the draft's), as plan() predicts it.
Where the model departs from the seed: verification turns compute-bound as B (K + 1) tokens
fill the GPU, the draft's own passes cost time, and the draft's weights and KV shrink the
cache (a batch the cache no longer holds queues).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from tokenfleet.capacity.load import Replica, closed
from tokenfleet.capacity.speculative import SpeculativeTimer, crossover_batch, seed_speedup
from tokenfleet.capacity.types import PlanRequest

BATCHES = (1, 2, 4, 8, 16, 32, 64, 128, 256)


@dataclass(frozen=True)
class CurveRow:
    batch: int
    seed: float  # tau
    leviathan: float  # tau / (1 + K c)
    step_speedup: float  # plain decode step / speculative time per token
    tpot_without_ms: float  # closed loop at this concurrency
    tpot_with_ms: float
    held_without: int  # requests the KV cache holds at once
    held_with: int

    @property
    def load_speedup(self) -> float:
        return self.tpot_without_ms / self.tpot_with_ms if self.tpot_with_ms else 0.0


@dataclass(frozen=True)
class Curve:
    tensor_parallel_size: int
    pipeline_parallel_size: int
    rows: tuple[CurveRow, ...]
    crossover_batch: int | None  # step model: first batch where a token costs more
    tokens_per_step: float
    context: int


def speedup_curve(req: PlanRequest, batches: tuple[int, ...] = BATCHES) -> Curve:
    from tokenfleet.capacity import planner

    sp = req.speculative
    assert sp is not None
    ctx = planner._context(req)
    sized = planner._size(ctx, planner._candidates(req, ctx.per_node))
    timer = sized.step
    assert isinstance(timer, SpeculativeTimer)
    target = timer.target
    lay = sized.ev.layout
    bare_ctx = planner._context(replace(req, speculative=None))
    bare_ev = planner._evaluate(bare_ctx, lay, sized.max_len, sized.max_len)
    bare_replica = replace(sized.replica, kv_cache_tokens=bare_ev.kv_tokens)
    context = req.input_tokens + req.output_tokens // 2
    request_tokens = req.input_tokens + req.output_tokens
    k, tau = sp.num_speculative_tokens, sp.tokens_per_step
    rows = []
    for b in batches:
        plain = target.decode_step_seconds(b, b * context)
        spec = timer.decode_token_seconds(b, context)
        draft = timer.draft
        c = draft.decode_step_seconds(b, b * context) / plain if draft is not None else 0.0
        seqs = max(sized.replica.max_num_seqs, b)
        with_replica = replace(sized.replica, max_num_seqs=seqs)
        without_replica = replace(bare_replica, max_num_seqs=seqs)
        out = req.output_tokens
        with_ = closed(timer, with_replica, b, sized.prefill, out)
        without = closed(target, without_replica, b, sized.prefill, out)
        rows.append(
            CurveRow(
                batch=b,
                seed=tau,
                leviathan=seed_speedup(sp.rate, k, c),
                step_speedup=plain / spec if spec else 0.0,
                tpot_without_ms=without.tpot_p50 * 1e3,
                tpot_with_ms=with_.tpot_p50 * 1e3,
                held_without=without_replica.held(request_tokens),
                held_with=with_replica.held(request_tokens),
            )
        )
    return Curve(
        lay.tp,
        lay.pp,
        tuple(rows),
        crossover_batch(timer, target, context, max(batches)),
        tau,
        context,
    )


def held(replica: Replica, tokens: int) -> int:
    return replica.held(tokens)
