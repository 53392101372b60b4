"""tokenfleet.engines: the command lines each engine gets for a plan (pure, table-driven).

Whether the engines accept these flags is checked by their own parsers in
tests/system/test_engine_parsers.py; here: which flags appear, with which values, in which
order, for which plan.
"""

from __future__ import annotations

from functools import cache
from typing import Any

import pytest

from tokenfleet.capacity import Plan, PlanRequest, get_gpu, load_model, plan
from tokenfleet.engines import (
    ENGINES,
    Launch,
    NodeRole,
    engine_args,
    engine_command,
    engine_info,
    worker_serves_health,
)
from tokenfleet.engines.common import fmt_fraction
from tokenfleet.errors import UserError

LEADER = NodeRole(2, 0, "$(LWS_LEADER_ADDRESS)")
WORKER = NodeRole(2, "$(LWS_WORKER_INDEX)", "$(LWS_LEADER_ADDRESS)")


@cache
def _plan(model: str, gpu: str, **kw: Any) -> Plan:
    return plan(PlanRequest(arch=load_model(model), gpu=get_gpu(gpu), **kw))


def flag(args: list[str], name: str) -> str | None:
    """The value after `name`, or None when the flag is absent."""
    return args[args.index(name) + 1] if name in args else None


def small(engine: str = "vllm", **kw: Any) -> Plan:
    return _plan("meta-llama/Llama-3.1-8B", "l4", engine=engine, **kw)


def big(engine: str = "vllm", **kw: Any) -> Plan:
    return _plan("meta-llama/Llama-3.1-405B", "h100-sxm", engine=engine, max_model_len=16384, **kw)


@pytest.mark.parametrize(
    ("engine", "program", "flags"),
    [
        (
            "vllm",
            ["vllm", "serve", "MODEL"],
            {
                "--port": "8000",
                "--tensor-parallel-size": "tensor_parallel_size",
                "--pipeline-parallel-size": "pipeline_parallel_size",
                "--gpu-memory-utilization": "memory_fraction",
                "--max-model-len": "max_model_len",
                "--max-num-seqs": "max_num_seqs",
                "--max-num-batched-tokens": "max_num_batched_tokens",
            },
        ),
        (
            "sglang",
            ["python3", "-m", "sglang.launch_server", "--model-path", "MODEL"],
            {
                "--port": "30000",
                "--host": "0.0.0.0",
                "--tp-size": "tensor_parallel_size",
                "--pp-size": "pipeline_parallel_size",
                "--mem-fraction-static": "memory_fraction",
                "--context-length": "max_model_len",
                "--max-running-requests": "max_num_seqs",
                "--chunked-prefill-size": "max_num_batched_tokens",
            },
        ),
    ],
)
def test_single_node_command_carries_the_plan(
    engine: str, program: list[str], flags: dict[str, str]
) -> None:
    p = small(engine)
    command = engine_command(p, Launch("MODEL"))
    assert command[: len(program)] == program
    for name, source in flags.items():
        want = getattr(p, source, source)
        assert flag(command, name) == (fmt_fraction(want) if isinstance(want, float) else str(want))
    for absent in ("--kv-cache-dtype", "--dtype", "--quantization", "--nnodes", "--headless"):
        assert absent not in command


def test_memory_fraction_is_printed_without_float_noise() -> None:
    assert [fmt_fraction(x) for x in (0.9, 0.9000000000000001, 0.925, 1.0)] == [
        "0.9", "0.9", "0.925", "1",
    ]  # fmt: skip


def test_sglang_needs_and_gets_enable_metrics() -> None:
    assert engine_info("sglang").metrics_need_flag
    assert "--enable-metrics" in engine_command(small("sglang"), Launch("m"))
    assert not engine_info("vllm").metrics_need_flag


@pytest.mark.parametrize(
    ("engine", "kv", "want"),
    [
        ("vllm", "fp8", "fp8"),
        ("vllm", "fp8_e5m2", "fp8_e5m2"),
        ("sglang", "fp8", "fp8_e4m3"),  # vLLM's "fp8" is E4M3; SGLang spells it out
        ("sglang", "fp8_e5m2", "fp8_e5m2"),
    ],
)
def test_kv_cache_dtype_is_spelled_for_the_engine(engine: str, kv: str, want: str) -> None:
    assert (
        flag(engine_args(small(engine, kv_cache_dtype=kv), Launch("m")), "--kv-cache-dtype") == want
    )


@pytest.mark.parametrize("engine", ["vllm", "sglang"])
def test_dtype_and_requested_quantization_are_passed(engine: str) -> None:
    p = _plan("Qwen/Qwen3-8B", "l40s", engine=engine, dtype="bf16", quantization="fp8")
    args = engine_args(p, Launch("m"))
    assert (flag(args, "--dtype"), flag(args, "--quantization")) == ("bfloat16", "fp8")


def test_quantization_read_from_the_checkpoint_is_left_to_the_engine() -> None:
    p = _plan("openai/gpt-oss-20b", "h100-sxm")
    assert p.quantization not in (None, "none")  # the planner saw mxfp4 in the config
    assert "--quantization" not in engine_args(p, Launch("openai/gpt-oss-20b"))


@pytest.mark.parametrize(
    ("engine", "prefix_caching", "present", "absent"),
    [
        ("vllm", None, [], ["--enable-prefix-caching", "--no-enable-prefix-caching"]),
        ("vllm", True, ["--enable-prefix-caching"], ["--no-enable-prefix-caching"]),
        ("vllm", False, ["--no-enable-prefix-caching"], ["--enable-prefix-caching"]),
        ("sglang", None, [], ["--disable-radix-cache"]),
        ("sglang", True, [], ["--disable-radix-cache"]),
        ("sglang", False, ["--disable-radix-cache"], []),
    ],
)
def test_prefix_caching_only_when_chosen(
    engine: str, prefix_caching: bool | None, present: list[str], absent: list[str]
) -> None:
    args = engine_args(small(engine), Launch("m", prefix_caching=prefix_caching))
    assert all(f in args for f in present)
    assert not any(f in args for f in absent)


@pytest.mark.parametrize("engine", ["vllm", "sglang"])
def test_served_name_and_extra_args_come_last_so_the_user_wins(engine: str) -> None:
    extra = ["--max-num-seqs", "7", "--load-format", "runai_streamer"]
    args = engine_args(small(engine), Launch("m", served_name="chat", extra_args=tuple(extra)))
    assert flag(args, "--served-model-name") == "chat"
    assert args[-len(extra) :] == extra


@pytest.mark.parametrize(
    ("engine", "node", "want", "absent"),
    [
        (
            "vllm",
            LEADER,
            {"--nnodes": "2", "--node-rank": "0", "--master-addr": "$(LWS_LEADER_ADDRESS)",
             "--master-port": "29501", "--distributed-executor-backend": "mp"},
            ["--headless"],
        ),
        (
            "vllm",
            WORKER,
            {"--nnodes": "2", "--node-rank": "$(LWS_WORKER_INDEX)",
             "--master-addr": "$(LWS_LEADER_ADDRESS)", "--headless": None},
            [],
        ),
        (
            "sglang",
            LEADER,
            {"--nnodes": "2", "--node-rank": "0", "--dist-init-addr": "$(LWS_LEADER_ADDRESS):5000"},
            ["--headless", "--master-addr"],
        ),
        (
            "sglang",
            WORKER,
            {"--nnodes": "2", "--node-rank": "$(LWS_WORKER_INDEX)",
             "--dist-init-addr": "$(LWS_LEADER_ADDRESS):5000"},
            [],
        ),
    ],
)  # fmt: skip
def test_multi_node_roles(
    engine: str, node: NodeRole, want: dict[str, str | None], absent: list[str]
) -> None:
    p = big(engine)
    assert p.nodes_per_replica == 2
    command = engine_command(p, Launch("m", node=node))
    for name, value in want.items():
        assert name in command, name
        if value is not None:
            assert flag(command, name) == value, name
    assert not any(f in command for f in absent)
    assert flag(command, "--tensor-parallel-size" if engine == "vllm" else "--tp-size") == "8"


def test_single_node_role_adds_no_distributed_flags() -> None:
    args = engine_args(small(), Launch("m", node=NodeRole(1, 0, "x")))
    assert args == engine_args(small(), Launch("m"))


@pytest.mark.parametrize(
    ("node", "starts_with", "contains"),
    [
        (LEADER, "bash /vllm-workspace/examples/online_serving/multi-node-serving.sh leader "
         "--ray_cluster_size=2; exec vllm serve m ", "--distributed-executor-backend ray"),
        (WORKER, "bash /vllm-workspace/examples/online_serving/multi-node-serving.sh worker "
         "--ray_address=$(LWS_LEADER_ADDRESS)", ""),
    ],
)  # fmt: skip
def test_vllm_before_0_12_runs_multi_node_on_ray(
    node: NodeRole, starts_with: str, contains: str
) -> None:
    command = engine_command(big(engine_version="0.10.2"), Launch("m", node=node))
    assert command[:2] == ["/bin/sh", "-c"]
    assert command[2].startswith(starts_with)
    assert contains in command[2]
    assert "--nnodes" not in command[2]


def test_program_can_be_replaced_for_images_without_the_vllm_script() -> None:
    program = ["python3", "-m", "vllm.entrypoints.openai.api_server"]
    command = engine_command(small(), Launch("m"), program=program)
    assert command[:4] == ["python3", "-m", "vllm.entrypoints.openai.api_server", "m"]


@pytest.mark.parametrize(
    ("engine", "port", "ttft", "kv_usage"),
    [
        ("vllm", 8000, "vllm:time_to_first_token_seconds",
         ("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc")),
        ("sglang", 30000, "sglang:time_to_first_token_seconds", ("sglang:token_usage",)),
    ],
)  # fmt: skip
def test_engine_info(engine: str, port: int, ttft: str, kv_usage: tuple[str, ...]) -> None:
    info = ENGINES[engine]
    assert (info.port, info.health_path, info.metrics_path) == (port, "/health", "/metrics")
    assert info.metrics.ttft == ttft
    assert info.metrics.kv_usage == kv_usage
    assert list(info.metrics.ttft_buckets) == sorted(info.metrics.ttft_buckets)
    assert info.metrics.itl[0].endswith("inter_token_latency_seconds")


def test_vllm_lists_old_and_new_itl_names() -> None:
    assert ENGINES["vllm"].metrics.itl == (
        "vllm:inter_token_latency_seconds",
        "vllm:time_per_output_token_seconds",
    )


def test_unknown_engine_names_the_field() -> None:
    with pytest.raises(UserError, match=r"^engine=tgi: unknown engine; use vllm or sglang"):
        engine_info("tgi")


@pytest.mark.parametrize(
    ("engine", "version", "want"),
    [("vllm", None, False), ("sglang", None, True), ("sglang", "0.4.9", False)],
)
def test_worker_serves_health(engine: str, version: str | None, want: bool) -> None:
    assert worker_serves_health(big(engine, engine_version=version)) is want
