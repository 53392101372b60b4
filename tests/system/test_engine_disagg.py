"""The engines' own code accepts what a disaggregated LLMService renders for each role.

vLLM: every rendered command of the P/D render cases goes through `vllm serve`'s parser and
AsyncEngineArgs.from_cli_args, which turns --kv-transfer-config into the installed vLLM's
KVTransferConfig (a validated config class: an unknown kv_role or kv_load_failure_policy is
refused there); the test reads back the connector, the role and the failure policy. The
same class must refuse a policy it does not have, so the check can fail.
SGLang: ServerArgs.from_cli_args with SGLang's own parser; the disaggregation mode, backend
and bootstrap port read back.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.support.render_cases import render_case

REPO = Path(__file__).resolve().parents[2]
CASES = {"vllm": "vllm-70b-pd", "sglang": "sglang-32b-pd"}

SCRIPT = r"""
import argparse, contextlib, io, json, sys
engine, commands = json.load(sys.stdin)
out = []
if engine == "vllm":
    from vllm.config.kv_transfer import KVTransferConfig
    from vllm.engine.arg_utils import AsyncEngineArgs
    from vllm.entrypoints.launchers.cli_args import make_arg_parser, validate_parsed_serve_args
    from vllm.utils.argparse_utils import FlexibleArgumentParser
    for args in commands:
        ns = make_arg_parser(FlexibleArgumentParser()).parse_args(args)
        if ns.model_tag is not None:
            ns.model = ns.model_tag
        validate_parsed_serve_args(ns)
        kv = AsyncEngineArgs.from_cli_args(ns).kv_transfer_config
        out.append({"type": type(kv).__name__, "connector": kv.kv_connector,
                    "role": kv.kv_role, "policy": kv.kv_load_failure_policy,
                    "producer": kv.is_kv_producer, "consumer": kv.is_kv_consumer,
                    "port": ns.port})
    try:
        KVTransferConfig(kv_connector="NixlConnector", kv_role="kv_consumer",
                         kv_load_failure_policy="retry")
        out.append({"bad_policy": "accepted"})
    except Exception as e:
        out.append({"bad_policy": type(e).__name__})
else:
    from sglang.srt.server_args import ServerArgs
    for args in commands:
        parser = argparse.ArgumentParser()
        ServerArgs.add_cli_args(parser)
        s = ServerArgs.from_cli_args(parser.parse_args(args))
        out.append({"mode": s.disaggregation_mode,
                    "backend": s.disaggregation_transfer_backend,
                    "bootstrap": s.disaggregation_bootstrap_port, "port": s.port})
print("RESULT" + json.dumps(out))
"""


def engines_python() -> str:
    python = os.environ.get("TOKENFLEET_ENGINES_PYTHON") or str(REPO / ".venv-engines/bin/python")
    if not Path(python).exists():
        pytest.fail(f"{python} does not exist: run `make engines`", pytrace=False)
    return python


def role_commands(engine: str) -> dict[str, list[str]]:
    """role -> the engine's arguments after its program, from the rendered workloads."""
    out = {}
    for m in render_case(CASES[engine]).manifests:
        template = (m.get("spec") or {}).get("template") or {}
        role = ((template.get("metadata") or {}).get("labels") or {}).get("llm-d.ai/role")
        if m["kind"] != "Deployment" or role is None:
            continue
        (engine_container,) = [c for c in template["spec"]["containers"] if c["name"] == "engine"]
        out[role] = list(engine_container["args"])
    return out


def run(engine: str, commands: list[list[str]]) -> list[dict[str, Any]]:
    proc = subprocess.run(
        [engines_python(), "-c", SCRIPT],
        input=json.dumps([engine, commands]),
        capture_output=True,
        text=True,
        timeout=600,
        env={k: v for k, v in os.environ.items() if k not in ("HF_HUB_OFFLINE",)},
    )
    marker = [line for line in proc.stdout.splitlines() if line.startswith("RESULT")]
    assert proc.returncode == 0 and marker, proc.stderr[-3000:]
    result: list[dict[str, Any]] = json.loads(marker[-1].removeprefix("RESULT"))
    return result


@pytest.mark.engines
def test_vllm_kv_transfer_config_is_parsed_and_validated_by_vllm() -> None:
    commands = role_commands("vllm")
    prefill, decode, bad = run("vllm", [commands["prefill"], commands["decode"]])
    assert prefill["type"] == decode["type"] == "KVTransferConfig"
    assert (prefill["connector"], prefill["role"]) == ("NixlConnector", "kv_producer")
    assert prefill["producer"] and not prefill["consumer"]
    assert (decode["connector"], decode["role"]) == ("NixlConnector", "kv_consumer")
    assert decode["policy"] == "recompute" and decode["consumer"]
    assert prefill["policy"] == "fail"  # the class's default: prefill reads no KV
    assert decode["port"] == prefill["port"] + 200  # behind the routing sidecar
    assert bad["bad_policy"] != "accepted"  # the config class does check the key


@pytest.mark.engines
def test_sglang_disaggregation_flags_are_parsed_by_sglang() -> None:
    commands = role_commands("sglang")
    prefill, decode = run("sglang", [commands["prefill"], commands["decode"]])
    assert (prefill["mode"], decode["mode"]) == ("prefill", "decode")
    assert prefill["backend"] == decode["backend"] == "mooncake"
    assert prefill["bootstrap"] == 8998
    assert decode["port"] == prefill["port"] + 200


STATS = r"""
import inspect, json, re
from vllm.distributed.kv_transfer.kv_connector.v1.nixl import stats
text = inspect.getsource(stats)
print("RESULT" + json.dumps(text))
"""


@pytest.mark.engines
def test_the_simulators_nixl_series_are_vllms() -> None:
    """`tokenfleet sim --role decode` exports the transfer series under the names and with the
    buckets the installed vLLM's NIXL connector defines (read from its source)."""
    from tokenfleet.sim.roles import BYTES_BUCKETS, XFER_BUCKETS

    proc = subprocess.run([engines_python(), "-c", STATS], capture_output=True, text=True,
                          timeout=600)  # fmt: skip
    marker = [line for line in proc.stdout.splitlines() if line.startswith("RESULT")]
    assert proc.returncode == 0 and marker, proc.stderr[-2000:]
    source = json.loads(marker[-1].removeprefix("RESULT"))
    assert 'name="vllm:nixl_xfer_time_seconds"' in source
    assert 'name="vllm:nixl_bytes_transferred"' in source
    listed = [float(x) for x in re.findall(r"^\s+([0-9.]+),$", source.split("buckets = [", 1)[1]
                                            .split("]", 1)[0], re.M)]  # fmt: skip
    assert tuple(listed[1:]) == XFER_BUCKETS  # the transfer time drops the first bound
    assert "buckets = [2 ** (10 + i) for i in range(1, 25, 2)]" in source
    assert tuple(float(2 ** (10 + i)) for i in range(1, 25, 2)) == BYTES_BUCKETS
