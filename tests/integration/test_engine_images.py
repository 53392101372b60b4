"""`tokenfleet operator --engine-image` reaches what the operator applies: the image table
travels in the Pipeline into the shared desired-state function (render/desired.py)."""

from __future__ import annotations

from tests.support.cluster_objects import DEPLOYMENTS, create, example
from tests.support.operator_harness import NAMESPACE, StartOperator, eventually
from tokenfleet.controller.reconcile import Pipeline
from tokenfleet.engines.images import with_overrides
from tokenfleet.testing.kmock_cluster import Cluster

NAME = "llama-3-1-8b"


async def test_an_engine_image_override_is_what_the_operator_applies(
    cluster: Cluster, start_operator: StartOperator
) -> None:
    images = with_overrides(["vllm=mirror.example/vllm/vllm-openai:v{version}"])
    await start_operator(Pipeline(images=images))
    await create(cluster, example("llama-3.1-8b-l4.yaml"))
    deployment = await eventually(
        lambda: cluster.get(DEPLOYMENTS, NAMESPACE, NAME), what="the Deployment"
    )
    containers = deployment["spec"]["template"]["spec"]["containers"]
    assert containers[0]["image"].startswith("mirror.example/vllm/vllm-openai:v")
