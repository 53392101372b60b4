"""The node selection of every placement provider, MIG slices included, is valid Kubernetes:
the engine Deployments rendered for each (provider, GPU type) go through
`kubernetes-validate --strict`, as tests/system/test_manifests_validate.py does for the
examples. Types a provider does not offer are skipped here (tests/unit/capacity/
test_placement.py checks that they are refused)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from test_manifests_validate import VERSIONS, run_validator

from tokenfleet.api import parse_llmservice
from tokenfleet.capacity import get_gpu
from tokenfleet.capacity.placement import PROVIDERS, node_selection
from tokenfleet.errors import UserError
from tokenfleet.render.desired import Cluster, desired

TYPES = (
    "l4",
    "l40s",
    "a100-80gb",
    "h100-sxm",
    "mi300x",
    "a100-80gb-mig-3g.40gb",
    "h100-sxm-mig-2g.20gb",
)
USER_AFFINITY = {
    "nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [
                {"matchExpressions": [{"key": "pool", "operator": "In", "values": ["gpu"]}]}
            ]
        }
    }
}


def _deployments(provider: str) -> list[dict[str, Any]]:
    out = []
    for gpu in TYPES:
        try:
            node_selection(get_gpu(gpu), provider)
        except UserError:
            continue
        for affinity in (None, USER_AFFINITY):
            spec: dict[str, Any] = {
                "model": {"id": "meta-llama/Llama-3.1-8B"},
                "gpu": {"type": gpu, "count": 1, **({"affinity": affinity} if affinity else {})},
                "workload": {"maxModelLen": 8192},
                "slo": {"ttftMs": 3000, "tpotMs": 150},
            }
            body = {
                "apiVersion": "tokenfleet.dev/v1alpha1",
                "kind": "LLMService",
                "metadata": {"name": f"llm-{len(out)}", "namespace": "team-a"},
                "spec": spec,
            }
            state = desired(parse_llmservice(body), None, Cluster(placement=provider))
            out += [m for m in state.manifests if m["kind"] == "Deployment" and "engine" in str(m)]
    return out


@pytest.mark.parametrize("version", VERSIONS)
def test_every_providers_node_selection_passes_kubernetes_validate_strict(
    version: str, tmp_path: Path
) -> None:
    docs: list[dict[str, Any]] = []
    for provider in PROVIDERS:
        rendered = _deployments(provider)
        assert rendered, provider
        docs += rendered
    pods = [d["spec"]["template"]["spec"] for d in docs]
    # Both forms are exercised: nodeSelector values and In-expressions (GKE's two H100s).
    assert any("nodeSelector" in p for p in pods)
    assert any(
        e["operator"] == "In" and len(e["values"]) > 1
        for p in pods
        for t in p.get("affinity", {})
        .get("nodeAffinity", {})
        .get("requiredDuringSchedulingIgnoredDuringExecution", {})
        .get("nodeSelectorTerms", [])
        for e in t["matchExpressions"]
    )
    limits = {k for p in pods for k in p["containers"][0]["resources"]["limits"]}
    assert {"nvidia.com/mig-3g.40gb", "nvidia.com/mig-2g.20gb", "amd.com/gpu"} <= limits
    code, output = run_validator(docs, version, tmp_path)
    problems = [line for line in output.splitlines() if not line.startswith("INFO")]
    assert code == 0 and not problems, "\n".join(problems)
    passed = [line for line in output.splitlines() if " passed for resource " in line]
    assert len(passed) == len(docs), output
