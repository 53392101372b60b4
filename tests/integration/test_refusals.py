"""The operator refuses what `tokenfleet plan` refuses, naming the YAML field (kmock)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.support.cluster_objects import create, degraded_condition, example, owned
from tests.support.operator_harness import StartOperator
from tokenfleet.testing.kmock_cluster import Cluster


@pytest.mark.parametrize(
    ("name", "change", "fragment"),
    [
        ("future-engine", {"engine": {"version": "99.0"}},
         "spec.engine.version=99.0: is newer than any vllm release"),
        ("awq-on-bf16", {"model": {"quantization": "awq"}},
         "spec.model.quantization=awq: does not match the checkpoint"),
        ("bad-tp", {"gpu": {"tensorParallelSize": 3}},
         "spec.gpu.tensorParallelSize=3: tensor-parallel size does not divide"),
        # LoRA slots that leave no KV cache for one request of maxModelLen
        ("lora-no-kv", {"gpu": {"tensorParallelSize": 1}, "workload": {"maxModelLen": 32768},
                        "lora": {"maxLoras": 16, "maxRank": 512}},
         "spec.lora.maxLoras=16: 16 adapter slot(s) at rank 512 take 44.04 GiB per GPU, which "
         "leaves no KV cache for one request of max-model-len 32,768"),
        ("lora-rank-48", {"lora": {"maxRank": 48}},
         "spec.lora.maxRank=48: is not a rank vLLM preallocates"),
    ],
)  # fmt: skip
async def test_refused_with_the_spec_field(
    cluster: Cluster,
    start_operator: StartOperator,
    name: str,
    change: dict[str, Any],
    fragment: str,
) -> None:
    await start_operator()
    body = example("llama-3.1-8b-l4.yaml")
    body["metadata"]["name"] = name
    for section, values in change.items():
        body["spec"].setdefault(section, {}).update(values)
    body["spec"]["gpu"].pop("count", None)
    await create(cluster, body)
    degraded = await degraded_condition(cluster, name)
    assert degraded["reason"] == "PlanFailed"
    assert fragment in degraded["message"], degraded["message"]
    assert " --" not in degraded["message"]  # no CLI flag in a YAML user's status
    assert owned(cluster) == []
