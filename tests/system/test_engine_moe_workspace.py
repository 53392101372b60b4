"""The MoE activation term of the capacity model against vLLM's own workspace shapes.

vLLM's profile run sizes its fused-MoE scratch with `TritonExperts.workspace_shapes`; the
capacity model restates it (capacity/memory.py: moe_workspace_per_token). This runs the
installed engine's method (engines venv, built by `make engines`) on the expert shapes of
every MoE model in the catalog at TP 1, 2, 4 and 8, and compares element counts.
"""

from __future__ import annotations

import json
import subprocess

import pytest

from tests.support.real_vllm import engines_python
from tokenfleet.capacity import load_model
from tokenfleet.capacity.catalog import catalog_ids
from tokenfleet.capacity.memory import moe_workspace_per_token

SCRIPT = r"""
import json, sys
from math import prod
from vllm.model_executor.layers.fused_moe.activation import MoEActivation
from vllm.model_executor.layers.fused_moe.experts.triton_moe import TritonExperts
experts = object.__new__(TritonExperts)  # workspace_shapes reads no instance state
out = []
for m, n, k, topk, e in json.load(sys.stdin):
    w13, w2, fused = TritonExperts.workspace_shapes(
        experts, m, n, k, topk, e, e, None, MoEActivation.SILU
    )
    out.append(max(prod(w13), prod(fused)) + prod(w2))  # workspace13 also holds the output
print(json.dumps(out))
"""

TOKENS = 8192  # the profile run's max_num_batched_tokens on an H100


def moe_cases() -> list[tuple[str, int]]:
    cases = []
    for model_id in catalog_ids():
        arch = load_model(model_id)
        if arch.moe:
            cases += [(model_id, tp) for tp in (1, 2, 4, 8)]
    return cases


def test_moe_workspace_matches_vllm_triton_experts() -> None:
    cases = moe_cases()
    assert len(cases) >= 8, "the catalog should hold several MoE models"
    shapes = []
    for model_id, tp in cases:
        arch = load_model(model_id)
        assert arch.moe is not None
        m = arch.moe
        # N: the gate/up projection's output per rank; K: hidden.
        shapes.append((TOKENS, 2 * m.expert_intermediate // tp, arch.hidden,
                       m.experts_per_token, m.experts))  # fmt: skip
    proc = subprocess.run(
        [engines_python(), "-c", SCRIPT],
        input=json.dumps(shapes),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    engine = json.loads(proc.stdout.strip().splitlines()[-1])
    for (model_id, tp), vllm_elements in zip(cases, engine, strict=True):
        arch = load_model(model_id)
        assert arch.moe is not None
        ours = TOKENS * moe_workspace_per_token(
            arch.hidden, arch.moe.expert_intermediate, tp, arch.moe.experts_per_token
        )
        assert ours == pytest.approx(vllm_elements, rel=0.01), (model_id, tp)
