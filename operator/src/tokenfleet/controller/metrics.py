"""The operator's own Prometheus metrics (not the engines'): what it reconciled and how it went.

Each Metrics holds its own registry so tests can run several operators in one process; the
`tokenfleet operator` command serves it on --metrics-port.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, start_http_server

# Reconciles are a few API round trips: tens of ms normally, seconds when the apiserver is slow.
DURATION_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)


class Metrics:
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry if registry is not None else CollectorRegistry()
        self.reconciles = Counter(
            "tokenfleet_reconciles_total",
            "LLMService reconciles by result (applied, degraded, retry, error; gone: deleted "
            "during the pass, nothing applied).",
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

        # The autoscaler's decisions, per LLMService (series removed when it is deleted).
        scope = ["namespace", "llmservice"]
        self.autoscaler_desired = Gauge(
            "tokenfleet_autoscaler_desired_replicas",
            "Replicas the autoscaler last decided on.",
            scope,
            registry=self.registry,
        )
        self.autoscaler_ready = Gauge(
            "tokenfleet_autoscaler_ready_replicas",
            "Ready replicas the autoscaler last saw.",
            scope,
            registry=self.registry,
        )
        self.autoscaler_decisions = Counter(
            "tokenfleet_autoscaler_decisions_total",
            "Autoscaling decisions by direction (up, down, none) and driving signal.",
            [*scope, "direction", "driver"],
            registry=self.registry,
        )
        self.autoscaler_held = Gauge(
            "tokenfleet_autoscaler_held",
            "1 for the reason the last decision held, 0 for the other reasons.",
            [*scope, "reason"],
            registry=self.registry,
        )
        self.autoscaler_at_max = Gauge(
            "tokenfleet_autoscaler_at_max",
            "1 while the autoscaler wants more replicas than maxReplicas.",
            scope,
            registry=self.registry,
        )
        self.autoscaler_capacity = Gauge(
            "tokenfleet_autoscaler_capacity_rps",
            "Requests per second one replica serves within the SLO (predicted, observed).",
            [*scope, "source"],
            registry=self.registry,
        )

    def serve(self, port: int, addr: str = "0.0.0.0") -> None:
        start_http_server(port, addr=addr, registry=self.registry)
