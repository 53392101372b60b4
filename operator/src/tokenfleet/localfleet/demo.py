"""The demo's script: start the fleet, apply the example, drive a load step, show it live,
then plot and summarise. Ctrl-C / SIGTERM stop it cleanly (every process it started)."""

from __future__ import annotations

import asyncio
import signal
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from tokenfleet.bench.dataset import DatasetSpec
from tokenfleet.localfleet.fleet import FleetOptions, LocalFleet
from tokenfleet.localfleet.observe import Observer, Slo
from tokenfleet.localfleet.plot import plot
from tokenfleet.localfleet.view import COLUMNS, plan_header, row_line, summary

PLAN_TIMEOUT_S = 60.0  # wall seconds for the operator to plan and create the Deployment


@dataclass(frozen=True)
class DemoOptions:
    example: Path
    time_scale: float
    cold_start_s: float
    low: float
    high: float
    phases: tuple[float, float, float]
    ramp_s: float
    plot: Path
    workdir: Path | None
    sample_s: float


def load_llmservice(path: Path) -> dict[str, Any]:
    for doc in yaml.safe_load_all(path.read_text()):
        if doc and doc.get("kind") == "LLMService":
            doc.setdefault("metadata", {}).setdefault("namespace", "default")
            return dict(doc)
    raise ValueError(f"{path}: no LLMService in the file")


@dataclass(frozen=True)
class Schedule:
    """The load over simulated time: `low` for phases[0], a linear ramp to `high` over
    ramp_s, `high` until phases[0] + phases[1], then a step back to `low` for phases[2]."""

    phases: tuple[float, float, float]
    ramp_s: float
    low: float
    high: float

    @property
    def end(self) -> float:
        return sum(self.phases)

    def rate(self, t: float) -> float:
        base, busy, _ = self.phases
        if t < base or t >= base + busy:
            return self.low
        ramp = min(self.ramp_s, busy)
        if ramp > 0 and t < base + ramp:
            return self.low + (self.high - self.low) * (t - base) / ramp
        return self.high

    def expected(self) -> float:
        """Requests the schedule asks for over the run (its rate's integral): what a
        Poisson load sends on average."""
        base, busy, after = self.phases
        ramp = min(self.ramp_s, busy)
        return (
            self.low * (base + after)
            + (self.low + self.high) / 2 * ramp
            + self.high * (busy - ramp)
        )


async def _wait_planned(fleet: LocalFleet, ns: str, name: str) -> dict[str, Any]:
    deadline = time.monotonic() + PLAN_TIMEOUT_S
    while time.monotonic() < deadline:
        body = fleet.llmservice(ns, name) or {}
        status = body.get("status") or {}
        for cond in status.get("conditions") or []:
            if cond.get("type") == "Degraded" and cond.get("status") == "True":
                raise RuntimeError(f"LLMService {name} is Degraded: {cond.get('message')}")
        if status.get("plan") and status.get("observedGeneration"):
            return body
        await asyncio.sleep(0.2)
    assert fleet.operator is not None
    raise RuntimeError(f"the operator did not plan {name}:\n{fleet.operator.log_tail()}")


async def _wait_ready(fleet: LocalFleet, ns: str, name: str, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        status = (fleet.llmservice(ns, name) or {}).get("status") or {}
        if (status.get("readyReplicas") or 0) >= 1:
            return
        await asyncio.sleep(0.2)
    errors = fleet.kubelet.errors if fleet.kubelet else []
    raise RuntimeError(f"no replica of {name} became ready: {errors[-3:]}")


async def _run(options: DemoOptions, workdir: Path) -> int:
    body = load_llmservice(options.example)
    ns, name = body["metadata"]["namespace"], body["metadata"]["name"]
    slo = Slo.of(body)
    k = options.time_scale
    print(
        f"starting: emulated Kubernetes API (kmock), tokenfleet operator, Prometheus; "
        f"logs in {workdir} (kept after the run)",
        flush=True,
    )
    fleet_options = FleetOptions(time_scale=k, cold_start_s=options.cold_start_s)
    async with LocalFleet(workdir, fleet_options) as fleet:
        await fleet.apply(body)
        planned = await _wait_planned(fleet, ns, name)
        plan = planned["status"]["plan"]
        capacity = float((plan.get("predicted") or {}).get("goodputRequestsPerSecond") or 0)
        if capacity <= 0:
            raise RuntimeError(
                f"the plan for {name} meets no request within its SLO (goodput 0); pick a "
                "larger GPU or a looser slo in the example"
            )
        # One line per sample, appended like `kubectl get -w`: nothing is cut at the
        # terminal's width and earlier rows stay on screen (and in a redirected log).
        print("\n".join([*plan_header(name, planned, slo, k), "", COLUMNS]), flush=True)
        await _wait_ready(fleet, ns, name, (options.cold_start_s + 60) / k + 60)
        workload = body["spec"].get("workload") or {}
        dataset = DatasetSpec(
            input_len=int(workload.get("inputTokens", 2048)),
            output_len=int(workload.get("outputTokens", 300)),
        )
        served = body["spec"]["model"].get("servedName") or body["spec"]["model"]["id"]
        low, high = options.low * capacity, options.high * capacity
        schedule = Schedule(options.phases, options.ramp_s, low, high)
        load = await fleet.start_load(
            ns, name, served, dataset, schedule=schedule.rate, end_s=schedule.end
        )
        observer = Observer(fleet, ns, name, slo)
        start = time.monotonic()
        next_row = start + options.sample_s / k
        while (time.monotonic() - start) * k < schedule.end:
            load.check()
            if time.monotonic() >= next_row:
                next_row += options.sample_s / k
                row = await asyncio.to_thread(observer.sample)
                print(row_line(row, slo, k), flush=True)
            await asyncio.sleep(min(0.5, options.sample_s / k))
        done = list(load.finished)
        ok = [f for f in done if f.output.success]
        # Over the run: the windows' goodput over the windows' request rate. (One rate() over
        # the whole run would lose the counters of pods removed on the way.)
        served = sum(r.rate or 0.0 for r in observer.rows)
        good = sum(r.goodput or 0.0 for r in observer.rows)
        stats = {
            "finished": len(ok),
            "failed": len(done) - len(ok),
            "expected": schedule.expected(),
            "scheduled": load.scheduled,
            "sent": load.sent,
            "no_endpoint": load.no_endpoint,
            "too_busy": load.too_busy,
            "late": load.late,
            "worst_late_s": load.worst_late_s,
            "attainment": good / served if served else 0.0,
            "goodput": good / len(observer.rows) if observer.rows else 0.0,
        }
        gpus = int(plan.get("gpusPerReplica") or 1)
        lines = summary(observer.rows, slo, gpus, stats, k)
        path = plot(
            observer.rows,
            slo,
            f"tokenfleet demo: {name} ({body['spec']['gpu']['type']})",
            options.plot,
        )
    print("", *lines, f"plot: {path}", sep="\n", flush=True)
    return 0


async def run_demo(options: DemoOptions) -> int:
    # The logs stay after the run (success or not): the path announced at the start is
    # where they are at the end.
    workdir = options.workdir or Path(tempfile.mkdtemp(prefix="tokenfleet-demo-"))
    task = asyncio.current_task()
    loop = asyncio.get_running_loop()
    assert task is not None
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, task.cancel)
    code = 1
    try:
        code = await _run(options, workdir)
        return code
    except asyncio.CancelledError:
        print("\ninterrupted: every process the demo started is stopped", file=sys.stderr)
        return 130
    except RuntimeError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    finally:
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(sig)
        print(f"logs kept in {workdir}", file=sys.stderr if code else sys.stdout, flush=True)
