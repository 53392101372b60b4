"""Engine pods select their GPU by the placement provider's labels (capacity/placement.py):
a nodeSelector for single-valued labels, required node affinity for several values (ANDed
into each of the user's own terms), and the provider's extended resource."""

from __future__ import annotations

from typing import Any

import pytest

from tokenfleet.api import parse_llmservice
from tokenfleet.render.desired import Cluster, desired


def _service(gpu: dict[str, Any]) -> Any:
    return parse_llmservice(
        {
            "apiVersion": "tokenfleet.dev/v1alpha1",
            "kind": "LLMService",
            "metadata": {"name": "chat", "namespace": "team-a"},
            "spec": {
                "model": {"id": "meta-llama/Llama-3.1-8B"},
                "gpu": gpu,
                "workload": {"maxModelLen": 8192},
                "slo": {"ttftMs": 2000, "tpotMs": 100},
            },
        }
    )


def _pod(gpu: dict[str, Any], placement: str) -> dict[str, Any]:
    state = desired(_service(gpu), None, Cluster(placement=placement))
    deployment = next(m for m in state.manifests if m["kind"] == "Deployment")
    pod: dict[str, Any] = deployment["spec"]["template"]["spec"]
    return pod


def test_a_mig_slice_requests_its_mig_resource_on_its_gpu_nodes() -> None:
    pod = _pod({"type": "h100-sxm-mig-3g.40gb"}, "gfd")
    assert pod["nodeSelector"] == {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}
    limits = pod["containers"][0]["resources"]["limits"]
    assert limits["nvidia.com/mig-3g.40gb"] == "1" and "nvidia.com/gpu" not in limits


def test_gke_counts_a_partition_as_a_gpu_and_selects_its_size() -> None:
    pod = _pod({"type": "a100-80gb-mig-3g.40gb"}, "gke")
    assert pod["nodeSelector"] == {
        "cloud.google.com/gke-accelerator": "nvidia-a100-80gb",
        "cloud.google.com/gke-gpu-partition-size": "3g.40gb",
    }
    assert pod["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] == "1"


def test_several_values_become_required_affinity_anded_into_the_users_terms() -> None:
    user = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]},
                    {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["b"]}]},
                ]
            },
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {"weight": 1, "preference": {"matchExpressions": [
                    {"key": "spot", "operator": "In", "values": ["false"]}]}}
            ],
        }
    }  # fmt: skip
    pod = _pod({"type": "h100-sxm", "affinity": user, "nodeSelector": {"pool": "gpu"}}, "gke")
    gpu_term = {
        "key": "cloud.google.com/gke-accelerator",
        "operator": "In",
        "values": ["nvidia-h100-80gb", "nvidia-h100-mega-80gb"],
    }
    terms = pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
        "nodeSelectorTerms"
    ]
    assert [t["matchExpressions"][-1] for t in terms] == [gpu_term, gpu_term]
    assert [t["matchExpressions"][0]["values"] for t in terms] == [["a"], ["b"]]
    assert pod["affinity"]["nodeAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"]
    assert pod["nodeSelector"] == {"pool": "gpu"}  # the user's; the GPU is in the affinity
    # The spec's own affinity is not mutated by the render.
    assert len(user["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
        "nodeSelectorTerms"][0]["matchExpressions"]) == 1  # fmt: skip


def test_without_a_user_affinity_the_gpu_term_stands_alone() -> None:
    pod = _pod({"type": "h100-sxm", "count": 1}, "gke")
    terms = pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
        "nodeSelectorTerms"
    ]
    assert len(terms) == 1 and terms[0]["matchExpressions"][0]["operator"] == "In"
    assert "nodeSelector" not in pod


@pytest.mark.parametrize(
    ("placement", "selector"),
    [
        ("eks", {"karpenter.k8s.aws/instance-gpu-name": "a100",
                 "karpenter.k8s.aws/instance-gpu-memory": "81920"}),
        ("eks-auto", {"eks.amazonaws.com/instance-gpu-name": "a100",
                      "eks.amazonaws.com/instance-gpu-memory": "81920"}),
        ("aks", {"node.kubernetes.io/instance-type": "Standard_ND96amsr_A100_v4"}),
    ],
)  # fmt: skip
def test_cloud_labels_replace_the_gfd_product(placement: str, selector: dict[str, str]) -> None:
    assert _pod({"type": "a100-80gb"}, placement)["nodeSelector"] == selector


def test_the_spec_resource_name_still_wins() -> None:
    pod = _pod({"type": "l4", "resourceName": "example.com/l4"}, "gfd")
    assert pod["containers"][0]["resources"]["limits"]["example.com/l4"] == "2"
