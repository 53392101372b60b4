"""What the fleet looks like now, one row per sample: the operator's view (spec.replicas,
status.readyReplicas, status.autoscaling), Prometheus' (TTFT quantile of the engines' own
histograms) and the users' (SLO attainment and goodput of the load generator's requests).
Every number is in simulated seconds."""

from __future__ import annotations

import contextlib
import math
import time
from dataclasses import dataclass
from typing import Any

import httpx

from tokenfleet.localfleet.fleet import LocalFleet

# The signals' own window (autoscale/signals.py: four PodMonitor scrapes), simulated seconds.
WINDOW_SIM_S = 60.0


@dataclass(frozen=True)
class Slo:
    ttft_s: float
    tpot_s: float
    quantile: float
    attainment: float

    @classmethod
    def of(cls, body: dict[str, Any]) -> Slo:
        slo = body.get("spec", {}).get("slo") or {}
        # Defaults as the API's (api/workload.py): 500 / 50 ms, p95, 99%.
        return cls(
            ttft_s=float(slo.get("ttftMs", 500)) / 1000,
            tpot_s=float(slo.get("tpotMs", 50)) / 1000,
            quantile=float(slo.get("quantile", 0.95)),
            attainment=float(slo.get("attainment", 0.99)),
        )


@dataclass(frozen=True)
class Row:
    t: float  # simulated seconds since the fleet started
    offered: float  # load generator rate, simulated req/s
    desired: int | None  # LLMService spec.replicas
    ready: int | None  # LLMService status.readyReplicas
    pods: int  # sim processes running (the kubelet's count)
    ttft_quantile_s: float | None  # Prometheus, at slo.quantile over the window
    attainment: float | None  # client side, requests finished in the window
    goodput: float | None  # client side, good requests per simulated second
    decision: str  # status.autoscaling.reason (or the Autoscaling condition's)
    held: str | None  # status.autoscaling.held


def _autoscaling(status: dict[str, Any]) -> tuple[str, str | None]:
    auto = status.get("autoscaling") or {}
    reason = str(auto.get("reason") or "")
    if not reason:
        for cond in status.get("conditions") or []:
            if cond.get("type") == "Autoscaling":
                reason = f"{cond.get('reason')}: {cond.get('message')}"
    held = auto.get("held")
    return reason, str(held) if held else None


class Observer:
    def __init__(self, fleet: LocalFleet, namespace: str, name: str, slo: Slo) -> None:
        self.fleet = fleet
        self.namespace = namespace
        self.name = name
        self.slo = slo
        self.rows: list[Row] = []

    def ttft_quantile(self) -> float | None:
        """histogram_quantile over the engines' TTFT histograms; None when Prometheus is
        down or there is no traffic (NaN)."""
        k = self.fleet.options.time_scale
        window = f"{max(1, math.ceil(WINDOW_SIM_S / k))}s"
        sel = f'{{namespace="{self.namespace}",llmservice="{self.name}"}}'
        promql = (
            f"histogram_quantile({self.slo.quantile}, sum by (le) "
            f"(rate(vllm:time_to_first_token_seconds_bucket{sel}[{window}])))"
        )
        if not self.fleet.prometheus.running:
            return None
        with contextlib.suppress(httpx.HTTPError, RuntimeError):
            samples = self.fleet.prometheus.query(promql)
            if samples and math.isfinite(samples[0][1]):
                return samples[0][1]
        return None

    def client_window(self) -> tuple[float | None, float | None]:
        """(attainment, goodput req/s) of the requests that finished in the last window."""
        load = self.fleet.load
        if load is None:
            return None, None
        k = self.fleet.options.time_scale
        since = time.monotonic() - WINDOW_SIM_S / k
        done = [f for f in load.finished if f.output.success and f.sent + f.output.latency >= since]
        if not done:
            return None, 0.0
        good = sum(1 for f in done if load.meets(f, self.slo.ttft_s, self.slo.tpot_s))
        return good / len(done), good / WINDOW_SIM_S

    def sample(self) -> Row:
        body = self.fleet.llmservice(self.namespace, self.name) or {}
        status = body.get("status") or {}
        decision, held = _autoscaling(status)
        attainment, goodput = self.client_window()
        pods = 0
        if self.fleet.kubelet is not None:
            pods = self.fleet.kubelet.counts(self.namespace, self.name)[0]
        spec_replicas = body.get("spec", {}).get("replicas")
        row = Row(
            t=self.fleet.sim_seconds(),
            offered=self.fleet.load.rate if self.fleet.load is not None else 0.0,
            desired=int(spec_replicas) if spec_replicas is not None else status.get("replicas"),
            ready=status.get("readyReplicas"),
            pods=pods,
            ttft_quantile_s=self.ttft_quantile(),
            attainment=attainment,
            goodput=goodput,
            decision=decision,
            held=held,
        )
        self.rows.append(row)
        return row
