"""An LLMService body as a user writes one: Llama-3.1-8B on the given GPU, with the spec's
other sections as the test gives them (camelCase, as in a manifest)."""

from __future__ import annotations

from typing import Any


def llmservice(
    name: str = "chat", namespace: str = "default", gpu: str = "l4", **spec: Any
) -> dict[str, Any]:
    return {
        "apiVersion": "tokenfleet.dev/v1alpha1",
        "kind": "LLMService",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"model": {"id": "meta-llama/Llama-3.1-8B"}, "gpu": {"type": gpu}, **spec},
    }
