"""SGLang: its command line, ports, probes and metric names.

Flags are checked against SGLang's own parser (sglang.srt.server_args.ServerArgs
.add_cli_args + from_cli_args) by the system test test_engine_parsers.py.

Multi-node replicas: every node runs the same `launch_server` with `--nnodes`, `--node-rank`
and `--dist-init-addr LEADER:PORT`; only rank 0 serves HTTP.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tokenfleet.capacity.types import Plan
from tokenfleet.engines.common import engine_dtype, fmt_fraction, requested_quantization
from tokenfleet.engines.disagg import role_args
from tokenfleet.engines.lora import lora_args
from tokenfleet.engines.speculative import speculative_args
from tokenfleet.engines.types import EngineInfo, Launch, MetricNames

PORT = 30000
DIST_INIT_PORT = 5000  # the port the LWS SGLang example uses for --dist-init-addr
PROGRAM: tuple[str, ...] = ("python3", "-m", "sglang.launch_server")

# sglang/srt/observability/metrics_collector.py (SGLang 0.5): the histogram bounds the
# engine exports; the simulator's exporter uses these same tuples.
TTFT_BUCKETS = (
    0.1, 0.2, 0.4, 0.6, 0.8, 1.0, 2.0, 4.0, 6.0, 8.0, 10.0, 20.0, 40.0, 60.0, 80.0, 100.0,
    200.0, 400.0,
)  # fmt: skip
E2E_BUCKETS = (*TTFT_BUCKETS, 600.0, 1200.0, 1800.0, 2400.0)
ITL_BUCKETS = (
    0.002, 0.004, 0.006, 0.008, 0.01, 0.015, 0.02, 0.025, 0.03, 0.035, 0.04, 0.06, 0.08,
    0.1, 0.2, 0.4, 0.6, 0.8, 1.0, 2.0, 4.0, 6.0, 8.0,
)  # fmt: skip
QUEUE_BUCKETS = (
    0.0, 0.001, 0.005, 0.010, 0.050, 0.100, 0.200, 0.500, 1, 2, 3, 4, 5, 10, 15, 20, 30, 40,
    50, 60, 70, 80, 90, 100, 200, 300, 400, 500, 600, 700, 800, 900, 1000, 1200, 1400, 1600,
    1800, 2000, 2500, 3000,
)  # fmt: skip
TOKENS_BUCKETS = (
    100, 300, 500, 700, 1000, 1500, 2000, 3000, 4000, 5000, 6000, 7000, 8000, 9000, 10000,
    12500, 15000, 17500, 20000, 22500, 25000, 27500, 30000, 35000, 40000, 60000, 80000,
    100000, 200000, 300000, 400000, 600000, 800000, 1000000, 1100000,
)  # fmt: skip
# Token pool page in tokens: server_args.py's page_size default (1).
BLOCK_SIZE = 1


def request_token_buckets(max_model_len: int) -> tuple[float, ...]:
    """The bounds of SGLang's prompt- and generation-length histograms: fixed, whatever the
    context."""
    del max_model_len
    return TOKENS_BUCKETS


METRICS = MetricNames(
    ttft="sglang:time_to_first_token_seconds",
    itl=("sglang:inter_token_latency_seconds",),
    e2e="sglang:e2e_request_latency_seconds",
    queue_time="sglang:queue_time_seconds",
    running="sglang:num_running_reqs",
    waiting="sglang:num_queue_reqs",
    kv_usage=("sglang:token_usage",),
    request_success="sglang:num_requests_total",
    prompt_tokens="sglang:prompt_tokens_total",
    generation_tokens="sglang:generation_tokens_total",
    # Per-request TPOT (metrics_collector.py in 0.5.x); older releases only have the ITL.
    request_tpot="sglang:request_time_per_output_token_seconds",
    # sglang/srt/observability/metrics_collector.py (sglang 0.5.23, the installed engine):
    # prompt_tokens_histogram and generation_tokens_histogram (the mix), and
    # queue_time_seconds above (arrival to first scheduling).
    prompt_length="sglang:prompt_tokens_histogram",
    output_length="sglang:generation_tokens_histogram",
    # sglang/srt/observability/metrics_collector.py (0.5.23): the Gauge
    # "sglang:cache_hit_rate", the scheduler's recent prefix-cache hit rate.
    prefix_cache_hit_rate="sglang:cache_hit_rate",
    # srt/observability/metrics_collector.py (0.5.23): Gauge "sglang:spec_accept_length",
    # accepted drafts + the bonus token per verify forward, over the last decode log window.
    spec_accept_length="sglang:spec_accept_length",
    ttft_buckets=TTFT_BUCKETS,
    itl_buckets=ITL_BUCKETS,
)

INFO = EngineInfo(
    name="sglang",
    port=PORT,
    health_path="/health",
    metrics_path="/metrics",
    metrics=METRICS,
    metrics_need_flag=True,
    # node_rank >= 1 starts a small /health server once its scheduler is ready (checked in
    # 0.5.23's engine.py: launch_dummy_health_check_server).
    workers_health_since=(0, 5, 0),
    dist_port=DIST_INIT_PORT,
)

# The planner speaks vLLM's names; SGLang spells the FP8 formats out ("fp8" in vLLM is E4M3).
_KV_DTYPES = {
    "fp8": "fp8_e4m3",
    "fp8_e4m3fn": "fp8_e4m3",
}


def _kv_dtype(kv_cache_dtype: str) -> str:
    return _KV_DTYPES.get(kv_cache_dtype, kv_cache_dtype)


def engine_args(plan: Plan, launch: Launch, port: int = PORT) -> list[str]:
    """Everything after `python3 -m sglang.launch_server`; the user's extra args last (they win)."""
    if launch.serving is not None:
        port = launch.serving.port
    args = [
        "--model-path", launch.model_ref,
        "--host", "0.0.0.0",  # SGLang binds 127.0.0.1 by default: unreachable from the Service
        "--port", str(port),
        "--tp-size", str(plan.tensor_parallel_size),
        "--pp-size", str(plan.pipeline_parallel_size),
        "--mem-fraction-static", fmt_fraction(plan.memory_fraction),
        "--context-length", str(plan.max_model_len),
        "--max-running-requests", str(plan.max_num_seqs),
        "--chunked-prefill-size", str(plan.max_num_batched_tokens),
        "--enable-metrics",
    ]  # fmt: skip
    if plan.kv_cache_dtype not in ("", "auto"):
        args += ["--kv-cache-dtype", _kv_dtype(plan.kv_cache_dtype)]
    if plan.expert_parallel:
        args += ["--ep-size", str(plan.tensor_parallel_size)]  # experts over the TP group
    dtype = engine_dtype(plan.dtype)
    if dtype is not None:
        args += ["--dtype", dtype]
    quantization = requested_quantization(plan)
    if quantization is not None:
        args += ["--quantization", quantization]
    if launch.served_name:
        args += ["--served-model-name", launch.served_name]
    if launch.prefix_caching is False:
        # The radix (prefix) cache is on by default; there is no flag to turn it "on".
        args.append("--disable-radix-cache")
    node = launch.node
    if node is not None and node.nnodes > 1:
        args += [
            "--nnodes", str(node.nnodes),
            "--node-rank", str(node.node_rank),
            "--dist-init-addr", f"{node.leader_address}:{DIST_INIT_PORT}",
        ]  # fmt: skip
    args += speculative_args("sglang", plan.speculative, plan.engine_version)
    args += lora_args("sglang", plan.lora, launch.adapters)
    args += role_args(plan.engine, launch.serving)
    args += launch.extra_args
    return args


def engine_command(
    plan: Plan, launch: Launch, program: Sequence[str] = PROGRAM, port: int = PORT
) -> list[str]:
    """The container command for one process (a single-node replica, or one node of many)."""
    args = engine_args(plan, launch, port)
    return [*program, *args]


def error_body(info: dict[str, Any]) -> dict[str, Any]:
    """The JSON body of an error answer of the OpenAI-compatible server."""
    return {"object": "error", **info}
