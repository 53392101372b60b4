"""The operator's own Prometheus metrics (not the engines'): what it reconciled and how it went.

Each Metrics holds its own registry so tests can run several operators in one process; the
`tokenfleet operator` command serves it on --metrics-port.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Histogram, start_http_server

# Reconciles are a few API round trips: tens of ms normally, seconds when the apiserver is slow.
DURATION_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)


class Metrics:
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry if registry is not None else CollectorRegistry()
        self.reconciles = Counter(
            "tokenfleet_reconciles_total",
            "LLMService reconciles by result (applied, degraded, retry, error).",
            ["result"],
            registry=self.registry,
        )
        self.reconcile_errors = Counter(
            "tokenfleet_reconcile_errors_total",
            "Reconciles that failed on a Kubernetes API error, by HTTP status class.",
            ["code"],
            registry=self.registry,
        )
        self.reconcile_duration = Histogram(
            "tokenfleet_reconcile_duration_seconds",
            "Wall time of one reconcile (read, plan, render, apply, status).",
            buckets=DURATION_BUCKETS,
            registry=self.registry,
        )
        self.plans = Counter(
            "tokenfleet_plans_total",
            "Capacity plans by outcome (ok, failed).",
            ["outcome"],
            registry=self.registry,
        )
        self.scale_events = Counter(
            "tokenfleet_scale_events_total",
            "Changes of a workload's desired replicas, by direction (up, down).",
            ["direction"],
            registry=self.registry,
        )

    def serve(self, port: int, addr: str = "0.0.0.0") -> None:
        start_http_server(port, addr=addr, registry=self.registry)
