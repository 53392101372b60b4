"""What the fleet looks like now, one row per sample: the operator's view (spec.replicas,
status.readyReplicas, status.autoscaling) and the engines' own histograms through Prometheus
(TTFT quantile, SLO attainment, goodput). Every number is in simulated seconds."""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Any

import httpx

from tokenfleet.engines import engine_info
from tokenfleet.localfleet import timescale
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
    attainment: float | None  # TTFT and TPOT within the SLO (lower bound of the joint share)
    goodput: float | None  # requests per simulated second within the SLO
    decision: str  # status.autoscaling.reason (or the Autoscaling condition's)
    held: str | None  # status.autoscaling.held
    rate: float | None = None  # finished requests per simulated second (the engines' count)
    clock: timescale.Sample | None = None  # whether the machine kept the time scale


def _autoscaling(status: dict[str, Any]) -> tuple[str, str | None]:
    auto = status.get("autoscaling") or {}
    reason = str(auto.get("reason") or "")
    if reason and auto.get("driver"):
        reason = f"{auto['driver']}: {reason}"
    if not reason:
        for cond in status.get("conditions") or []:
            if cond.get("type") == "Autoscaling":
                reason = f"{cond.get('reason')}: {cond.get('message')}"
    held = auto.get("held")
    return reason, str(held) if held else None


def _fraction_within(buckets: dict[float, float], bound: float) -> float | None:
    """Share of observations <= bound from cumulative bucket rates {le: rate}: the largest
    boundary at or below the bound (exact at a boundary, a safe under-estimate between)."""
    total = buckets.get(math.inf)
    if not total or not math.isfinite(total) or total <= 0:
        return None
    below = [le for le in buckets if le <= bound + 1e-9]
    return min(1.0, buckets[max(below)] / total) if below else 0.0


class Observer:
    """Samples the fleet. The SLO numbers come from the engines' own histograms through
    Prometheus (simulated seconds, so the harness's own lag on a busy machine never shows up
    as latency); rates are divided by the time scale (Prometheus rates per wall second)."""

    def __init__(
        self, fleet: LocalFleet, namespace: str, name: str, slo: Slo, engine: str = "vllm"
    ) -> None:
        self.fleet = fleet
        self.namespace = namespace
        self.name = name
        self.slo = slo
        self.names = engine_info(engine).metrics
        self.rows: list[Row] = []
        self._clocks: dict[str, timescale.ClockReading] = {}
        self._late = 0

    def _window(self, sim_seconds: float) -> str:
        return f"{max(1, math.ceil(sim_seconds / self.fleet.options.time_scale))}s"

    def _sel(self) -> str:
        return f'{{namespace="{self.namespace}",llmservice="{self.name}"}}'

    def _query(self, promql: str) -> list[tuple[dict[str, str], float]] | None:
        if not self.fleet.prometheus.running:
            return None
        try:
            return self.fleet.prometheus.query(promql)
        except (httpx.HTTPError, RuntimeError):
            return None

    def _buckets(self, family: str, window: str) -> dict[float, float]:
        got = self._query(f"sum by (le) (rate({family}_bucket{self._sel()}[{window}]))") or []
        return {float(labels["le"]): value for labels, value in got if "le" in labels}

    def measure(self, window_sim_s: float = WINDOW_SIM_S) -> dict[str, float | None]:
        """TTFT quantile, TTFT / TPOT attainment, request rate and goodput over a window."""
        window = self._window(window_sim_s)
        ttft = self._buckets(self.names.ttft, window)
        tpot_family = self.names.request_tpot or self.names.itl[0]
        tpot = self._buckets(tpot_family, window)
        rate = self._query(f"sum(rate({self.names.request_success}{self._sel()}[{window}]))")
        requests = rate[0][1] / self.fleet.options.time_scale if rate else None
        a = _fraction_within(ttft, self.slo.ttft_s)
        b = _fraction_within(tpot, self.slo.tpot_s)
        joint = None if a is None or b is None else max(0.0, a + b - 1.0)
        quantile = None
        if ttft.get(math.inf):
            samples = self._query(
                f"histogram_quantile({self.slo.quantile}, sum by (le) "
                f"(rate({self.names.ttft}_bucket{self._sel()}[{window}])))"
            )
            if samples and math.isfinite(samples[0][1]):
                quantile = samples[0][1]
        return {
            "ttft_quantile": quantile,
            "ttft_attainment": a,
            "tpot_attainment": b,
            "attainment": joint,
            "request_rate": requests,
            "goodput": None if joint is None or requests is None else joint * requests,
        }

    def _clock_sample(self, t: float) -> timescale.Sample:
        """How far the engines and the load fell behind the time scale since the last
        sample: each running engine's /sim/clock, the load generator's late sends."""
        worst: float | None = None
        urls = []
        if self.fleet.kubelet is not None:
            urls = self.fleet.kubelet.base_urls(self.namespace, self.name)
        readings: dict[str, timescale.ClockReading] = {}
        for url in urls:
            try:
                body = httpx.get(f"{url}/sim/clock", timeout=2.0, trust_env=False).json()
                reading = timescale.ClockReading(time.monotonic(), float(body["lostSeconds"]))
            except (httpx.HTTPError, ValueError, KeyError, TypeError):
                continue  # a pod stopping: its next reading starts afresh
            readings[url] = reading
            before = self._clocks.get(url)
            if before is not None:
                share = timescale.behind(before, reading, self.fleet.options.time_scale)
                worst = share if worst is None else max(worst, share)
        self._clocks = readings
        load = self.fleet.load
        late = load.late if load is not None else 0
        sample = timescale.Sample(t, worst, late - self._late)
        self._late = late
        return sample

    def sample(self) -> Row:
        body = self.fleet.llmservice(self.namespace, self.name) or {}
        status = body.get("status") or {}
        decision, held = _autoscaling(status)
        m = self.measure()
        pods = 0
        if self.fleet.kubelet is not None:
            pods = self.fleet.kubelet.counts(self.namespace, self.name)[0]
        spec_replicas = body.get("spec", {}).get("replicas")
        t = self.fleet.sim_seconds()
        row = Row(
            t=t,
            offered=self.fleet.load.offered() if self.fleet.load is not None else 0.0,
            desired=int(spec_replicas) if spec_replicas is not None else status.get("replicas"),
            ready=status.get("readyReplicas"),
            pods=pods,
            ttft_quantile_s=m["ttft_quantile"],
            attainment=m["attainment"],
            goodput=m["goodput"],
            rate=m["request_rate"],
            decision=decision,
            held=held,
            clock=self._clock_sample(t),
        )
        self.rows.append(row)
        return row
