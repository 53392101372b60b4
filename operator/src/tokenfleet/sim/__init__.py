"""The engine simulator behind `tokenfleet sim`: an OpenAI-compatible server that behaves like
a vLLM or SGLang replica under load, timed by the capacity model.

    tokenfleet sim --model meta-llama/Llama-3.1-8B --gpu l4 [--engine sglang] [--time-scale 10]

Modules, each with one job:
- scheduler.py  re-exports tokenfleet.scheduling.core (shared with plan()): pure continuous
                batching (vLLM V1 style) on a virtual clock: KV blocks, max-num-seqs,
                chunked prefill, recompute preemption of the newest request.
- engine.py     runs the scheduler in (scaled) real time on asyncio; keeps this process's own
                lag out of the simulated clock, so metrics are the capacity model's.
- protocol.py   request parsing, response and SSE chunk shapes, engine-specific error bodies.
- server.py     aiohttp routes: /v1/models, /v1/completions, /v1/chat/completions, /health,
                /metrics.
- metrics.py    the engine's own Prometheus families (names, types, labels, buckets).
- tokens.py     the stand-in tokenizer (ceil(len(word) / 4) tokens per word) and filler text.
- setup.py      options -> plan() -> scheduler settings + step_model(plan).

What it does not model: prefix caching (every prompt is new), speculative decoding, LoRA,
n > 1, stop strings / EOS (it always generates max_tokens, like ignore_eos), and SGLang's own
scheduler policy (SGLang mode reuses the vLLM-style scheduler with a page size of 1).
"""
