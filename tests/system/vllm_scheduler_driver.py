"""vLLM's own V1 scheduler driven in virtual time (run by the engines venv's python).

`vllm.v1.core.sched.scheduler.Scheduler`, built as vLLM's tests build it
(tests/v1/core/utils.py create_scheduler: a VllmConfig, a KVCacheConfig of N blocks of one
full-attention group, no model), takes requests and schedules steps; the model's outputs are
faked (one sampled token per request whose known tokens are all computed, never EOS: the
benchmarks' --ignore-eos). Each step lasts what the step timer (tokenfleet's step model,
unpickled: PYTHONPATH holds operator/src) gives for the step's composition: prompt tokens
computed, decoding sequences and their context, attention pairs, counted as
tokenfleet.scheduling.core counts them.

Input (stdin, JSON): {"model_dir": a directory with a config.json (ModelConfig needs one;
no weights are read), "timers": [base64 pickles], "cases": [{"config": {...}, "timer": an
index, "arrivals" or "closed": ...}]}. Output (stdout, last line, JSON): per case, every
request's record (arrival, first token, last token, finish, output tokens, preemptions)
and the step trace's counts (steps, most running and waiting).

Procedures (the same as tokenfleet.scheduling.virtual's):
- "arrivals": requests arrive at the given times (all at 0: a burst; Poisson times: an
  open loop), each (time, prompt tokens, output tokens).
- "closed": `clients` clients; client i sends its first request at starts[i] and each next
  one `overhead` seconds after its last one ends, `num_prompts` in all.
A request that arrives during a step is seen at the next step's start, as the engine's
input queue is read between steps.
"""

from __future__ import annotations

import base64
import heapq
import json
import os
import pickle
import sys
import time
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("VLLM_NO_USAGE_STATS", "1")

import torch
from vllm.config import CacheConfig, ModelConfig, SchedulerConfig, VllmConfig
from vllm.sampling_params import SamplingParams
from vllm.utils.hashing import sha256
from vllm.v1.core.kv_cache_utils import get_request_block_hasher, init_none_hash
from vllm.v1.core.sched.scheduler import Scheduler
from vllm.v1.kv_cache_interface import (
    FullAttentionSpec,
    KVCacheConfig,
    KVCacheGroupSpec,
)
from vllm.v1.outputs import ModelRunnerOutput
from vllm.v1.request import Request
from vllm.v1.structured_output import StructuredOutputManager

SAMPLED_TOKEN = 5  # any id but the EOS of the config (2)


def make_scheduler(model_dir: str, c: dict[str, Any]) -> Scheduler:
    scheduler_config = SchedulerConfig(
        max_num_seqs=c["max_num_seqs"],
        max_num_batched_tokens=c["max_num_batched_tokens"],
        max_model_len=c["max_model_len"],
        enable_chunked_prefill=True,
        is_encoder_decoder=False,
        long_prefill_token_threshold=c["long_prefill_token_threshold"],
        scheduler_reserve_full_isl=c["reserve_full_sequence"],
    )
    model_config = ModelConfig(
        model=model_dir, skip_tokenizer_init=True, dtype="float32", max_model_len=c["max_model_len"]
    )
    cache_config = CacheConfig(
        block_size=c["block_size"], enable_prefix_caching=c["prefix_caching"]
    )
    vllm_config = VllmConfig(
        scheduler_config=scheduler_config, model_config=model_config, cache_config=cache_config
    )
    spec = FullAttentionSpec(
        block_size=c["block_size"], num_kv_heads=1, head_size=1, dtype=torch.float32
    )
    kv_cache_config = KVCacheConfig(
        num_blocks=c["num_blocks"],
        kv_cache_tensors=[],
        kv_cache_groups=[KVCacheGroupSpec(["layer"], spec)],
    )
    cache_config.num_gpu_blocks = c["num_blocks"]
    return Scheduler(
        vllm_config=vllm_config,
        kv_cache_config=kv_cache_config,
        structured_output_manager=StructuredOutputManager(vllm_config),
        block_size=c["block_size"],
        log_stats=False,
    )


def run(model_dir: str, timer: Any, case: dict[str, Any]) -> dict[str, Any]:
    c = case["config"]
    scheduler = make_scheduler(model_dir, c)
    hasher = get_request_block_hasher(c["block_size"], sha256)
    pending: list[tuple[float, int, int, int]] = []  # (at, index, prompt, output)
    closed = case.get("closed")
    sent = 0

    def send(at: float, prompt: int, output: int) -> None:
        nonlocal sent
        heapq.heappush(pending, (at, sent, prompt, output))
        sent += 1

    if closed is not None:
        shapes = closed["shapes"]
        for start in closed["starts"][: closed["num_prompts"]]:
            send(start, *shapes[sent % len(shapes)])
    else:
        for at, prompt, output in case["arrivals"]:
            send(at, prompt, output)
    records: dict[int, dict[str, Any]] = {}
    live: dict[str, Request] = {}
    now = 0.0
    steps = most_running = most_waiting = 0
    while pending or scheduler.get_num_unfinished_requests():
        while pending and pending[0][0] <= now:
            at, index, prompt, output = heapq.heappop(pending)
            # Unshared prompts: the first token differs between requests, so no block hash
            # of one request matches another's (a preempted request can hit its own).
            tokens = [1000 + index] + [7] * (prompt - 1)
            request = Request(
                request_id=str(index),
                prompt_token_ids=tokens,
                sampling_params=SamplingParams(max_tokens=output, ignore_eos=True),
                pooling_params=None,
                arrival_time=at,
                block_hasher=hasher,
            )
            scheduler.add_request(request)
            live[request.request_id] = request
            records[index] = {"arrival": at, "prompt": prompt, "first": None, "last": None,
                              "finished": None, "output": 0, "preemptions": 0}  # fmt: skip
        output_of_step = scheduler.schedule()
        scheduled = output_of_step.num_scheduled_tokens
        if not scheduled:
            if not pending:
                raise RuntimeError(
                    f"no step and nothing pending: {len(scheduler.running)} running, "
                    f"{len(scheduler.waiting)} waiting"
                )
            now = max(now, pending[0][0])
            continue
        steps += 1
        prefill = decode_seqs = decode_context = 0
        pairs = 0.0
        for request_id, tokens in scheduled.items():
            request = live[request_id]
            before = request.num_computed_tokens - tokens  # schedule() already advanced it
            if tokens == 1 and request.num_output_tokens > 0 and before == request.num_tokens - 1:
                decode_seqs += 1
                decode_context += request.num_tokens
            else:
                prefill += tokens
                pairs += tokens * tokens / 2 + tokens * before
        now += timer.step_seconds(prefill, decode_seqs, decode_context, pairs)
        request_ids = list(scheduled)
        sampled = [
            [SAMPLED_TOKEN] if live[r].num_computed_tokens >= live[r].num_tokens else []
            for r in request_ids
        ]
        runner_output = ModelRunnerOutput(
            req_ids=request_ids,
            req_id_to_index={r: i for i, r in enumerate(request_ids)},
            sampled_token_ids=sampled,
        )
        scheduler.update_from_output(output_of_step, runner_output)
        most_running = max(most_running, len(scheduler.running))
        most_waiting = max(most_waiting, len(scheduler.waiting))
        for request_id, tokens in zip(request_ids, sampled, strict=True):
            if not tokens:
                continue
            index = int(request_id)
            record, request = records[index], live[request_id]
            record["output"] += 1
            if record["first"] is None:
                record["first"] = now
            record["last"] = now
            if request.is_finished():
                record["finished"] = now
                record["preemptions"] = request.num_preemptions
                del live[request_id]
                if closed is not None and sent < closed["num_prompts"]:
                    send(now + closed["overhead"], *closed["shapes"][sent % len(closed["shapes"])])
    return {
        "records": [records[i] for i in sorted(records)],
        "steps": steps,
        "most_running": most_running,
        "most_waiting": most_waiting,
    }


def main() -> None:
    job = json.load(sys.stdin)
    init_none_hash(sha256)
    timers = [pickle.loads(base64.b64decode(t)) for t in job["timers"]]
    out = []
    for case in job["cases"]:
        started = time.process_time()
        result = run(job["model_dir"], timers[case["timer"]], case)
        result["cpu_seconds"] = time.process_time() - started
        out.append(result)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
