"""Prometheus families of an exposition, reduced to what two exporters must share: type,
label names and histogram buckets (the simulator's against a real engine's)."""

from __future__ import annotations

from dataclasses import dataclass

from prometheus_client.parser import text_string_to_metric_families


@dataclass(frozen=True)
class Family:
    type: str
    labels: frozenset[str]
    buckets: tuple[float, ...]


def families(text: str, prefix: str = "vllm:") -> dict[str, Family]:
    found: dict[str, Family] = {}
    for family in text_string_to_metric_families(text):
        if not family.name.startswith(prefix):
            continue
        labels: set[str] = set()
        buckets: set[float] = set()
        for sample in family.samples:
            labels.update(k for k in sample.labels if k != "le")
            if sample.name.endswith("_bucket"):
                buckets.add(float(sample.labels["le"]))
        found[family.name] = Family(family.type, frozenset(labels), tuple(sorted(buckets)))
    return found
