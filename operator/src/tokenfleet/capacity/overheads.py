"""What a client's TTFT holds besides the engine's steps: one table, fitted on H100 rows.

A request's time outside the scheduler's steps: HTTP, the server's tokenisation of the prompt
(random-token prompts of thousands of tokens take milliseconds to encode), hand-off to the
engine core and the first streamed chunk. Modelled per engine as a fixed part plus a part per
prompt token, added to TTFT and end-to-end latency and delaying a closed-loop client's next
request.

The same table holds how long a closed-loop benchmark's start burst lasts (`burst_rounds`,
vLLM only): every client sends at t = 0, so the first wave queues behind each other's prefill;
the clients' next requests then come back bunched and spread out over the following rounds
(HTTP and streaming jitter, vLLM's mixed steps finishing them at different times). The
benchmark's mean TTFT counts the first wave with weight 1 / burst_rounds and the steady closed
loop with the rest (silicon_bench.py). SGLang's waves do not spread (its prefill batches keep
them together): its benchmark is simulated round by round and needs no such number, except
where it was launched with --enable-mixed-chunk (calibration/silicon_harness.py): then it runs
vLLM's mixed schedule and its start burst takes vLLM's weight (`mixed_burst_rounds`).

Fitted by `tokenfleet calibrate --perf --silicon reference/silicon-h100.csv --fit` on the
calibration split of the H100 rows only (calibration/silicon_fit.py: the rows whose id hashes
to the fit part; the rest of H100 is held out, and the H200 / B200 rows are the test, never
looked at while fitting).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ClientOverhead:
    fixed_s: float
    per_prompt_token_s: float
    source: str
    burst_rounds: int = 20  # the first wave's weight in the mean TTFT / TPOT is 1 / this

    def seconds(self, prompt_tokens: int) -> float:
        return self.fixed_s + self.per_prompt_token_s * max(prompt_tokens, 0)


_FIT = "fit split of reference/silicon-h100.csv (calibration/silicon_fit.py)"
_VLLM = ClientOverhead(0.0175, 7.5e-6, _FIT + ", 147 rows", burst_rounds=6)
OVERHEADS: dict[str, ClientOverhead] = {
    "vllm": _VLLM,
    # The same client (aiperf, vllm bench serve) against an OpenAI-compatible front end that
    # tokenises the prompt, hands it to the scheduler and streams the tokens back
    # (sglang/srt/managers/tokenizer_manager.py, detokenizer_manager.py): vLLM's fit, whose
    # rows at concurrency 1-4 identify a per-request time. SGLang's H100 rows are all at
    # concurrency 16 or more, where a per-request overhead cannot be told from the start
    # burst's queueing: fitted there alone it came to 90 ms, which a request at
    # concurrency 1 does not pay (a short prompt's TTFT was predicted 3.7x what SGLang
    # measured). silicon_fit.fit copies vLLM's. burst_rounds: vLLM's, for the rows launched
    # with --enable-mixed-chunk.
    "sglang": ClientOverhead(
        _VLLM.fixed_s,
        _VLLM.per_prompt_token_s,
        "vLLM's (the same client; SGLang's rows cannot identify it)",
        burst_rounds=_VLLM.burst_rounds,
    ),
}


def overhead_of(engine: str) -> ClientOverhead:
    return OVERHEADS.get(engine, OVERHEADS["vllm"])


def mixed_burst_rounds() -> int:
    """The start burst's weight of a mixed prefill / decode schedule: fitted on vLLM's rows,
    the only mixed schedule among the H100 calibration rows."""
    return OVERHEADS["vllm"].burst_rounds


def request_overhead_s(engine: str, prompt_tokens: int) -> float:
    """Seconds a request spends outside the engine's steps (see the module docstring)."""
    return overhead_of(engine).seconds(prompt_tokens)
