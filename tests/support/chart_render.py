"""Render charts/tokenfleet with Helm's own Go SDK (the helm-python-sdk package), offline."""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import Any

import helm_python as helm
import yaml

from tests.support.gpu_overlay import NEW_GPU

REPO = Path(__file__).resolve().parents[2]
CHART = REPO / "charts" / "tokenfleet"
RELEASE, NAMESPACE = "tf", "tokenfleet-system"


# The value combinations a user picks: defaults; everything on; namespaced and single.
COMBINATIONS: dict[str, dict[str, Any]] = {
    "defaults": {},
    "everything": {
        "serviceMonitor": {"enabled": True},
        "prometheusRule": {"enabled": True},
        "grafanaDashboard": {"enabled": True},
        "crds": {"templated": True},
        "prometheusUrl": "http://prometheus-operated.monitoring:9090",
        "allowPrometheus": ["http://thanos-query.monitoring:9090"],
        "engineImages": {"vllm:amd": "mirror.local/vllm-rocm:v{version}"},
        "gpuCatalog": {"gpus": {"h100-sxm": {"pricePerHour": 2.49}, "rtx-pro-6000": NEW_GPU}},
        "logLevel": "debug",
    },
    "namespaced-standalone": {
        "watchNamespaces": ["team-a", "team-b"],
        "peering": {"enabled": False},
        "replicaCount": 1,
    },
}


@cache
def chart() -> helm.Chart:
    return helm.Chart.load(str(CHART))


def render(values: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """Every object the chart's templates render (NOTES.txt aside)."""
    out = chart().render(values or {}, name=RELEASE, namespace=NAMESPACE, is_install=True)
    docs = []
    for path, text in sorted(out.items()):
        if path.endswith("NOTES.txt"):
            continue
        docs.extend(d for d in yaml.safe_load_all(text) if d)
    return docs


def notes(values: dict[str, Any] | None = None) -> str:
    out = chart().render(values or {}, name=RELEASE, namespace=NAMESPACE, is_install=True)
    return next(text for path, text in out.items() if path.endswith("NOTES.txt"))


def of_kind(docs: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [d for d in docs if d["kind"] == kind]
