"""Pure formatting of the demo's terminal view: a plan header, one line per sample (like
`kubectl get -w`), and the closing summary."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any

from tokenfleet.localfleet import timescale
from tokenfleet.localfleet.load import LATE_S, MAX_IN_FLIGHT
from tokenfleet.localfleet.observe import Row, Slo

COLUMNS = (
    f"{'TIME':>6} {'LOAD':>6} {'REPLICAS':>8} {'TTFT-Q':>7} {'ATTAIN':>6} {'GOODPUT':>7}  DECISION"
)


def _num(value: float | None, fmt: str, missing: str = "-") -> str:
    return missing if value is None else format(value, fmt)


def plan_header(name: str, body: dict[str, Any], slo: Slo, time_scale: float) -> list[str]:
    spec = body.get("spec", {})
    plan = (body.get("status") or {}).get("plan") or {}
    predicted = plan.get("predicted") or {}
    auto = spec.get("autoscaling") or {}
    return [
        f"LLMService {name}: {spec.get('model', {}).get('id')} on "
        f"{spec.get('gpu', {}).get('type')}, {spec.get('engine', {}).get('kind', 'vllm')} "
        f"{plan.get('engineVersion', '')}",
        f"  plan      TP {plan.get('tensorParallelSize')} x PP {plan.get('pipelineParallelSize')}"
        f" = {plan.get('gpusPerReplica')} GPU(s) per replica, KV cache "
        f"{plan.get('kvCacheTokens', 0):,} tokens, max-model-len {plan.get('maxModelLen')}",
        f"  predicted TTFT {_num(predicted.get('ttftMs'), '.0f')} ms, TPOT "
        f"{_num(predicted.get('tpotMs'), '.1f')} ms, goodput "
        f"{_num(predicted.get('goodputRequestsPerSecond'), '.2f')} req/s per replica within "
        f"the SLO (TTFT {slo.ttft_s * 1000:.0f} ms at p{slo.quantile * 100:g}, TPOT "
        f"{slo.tpot_s * 1000:.0f} ms)",
        f"  autoscale {auto.get('minReplicas', 1)}..{auto.get('maxReplicas', 4)} replicas on "
        f"{auto.get('metric', 'ttft')}; time runs {time_scale:g}x (simulated seconds below)",
        f"  TTFT-Q is the p{slo.quantile * 100:g} TTFT in ms from Prometheus' "
        "histogram_quantile: a linear interpolation inside the engine's histogram bucket, not "
        "a measured request (! marks a breach of the SLO)",
    ]


def row_line(row: Row, slo: Slo, time_scale: float = 1.0) -> str:
    """One view line, the whole decision (a terminal wraps a long one; nothing is cut);
    a note first when the machine fell behind the time scale in the row's interval."""
    replicas = f"{_num(row.ready, 'd', '?')}/{_num(row.desired, 'd', '?')}"
    ttft = _num(None if row.ttft_quantile_s is None else row.ttft_quantile_s * 1000, ".0f")
    mark = ""
    if row.ttft_quantile_s is not None and row.ttft_quantile_s > slo.ttft_s:
        mark = "!"
    attain = _num(None if row.attainment is None else row.attainment * 100, ".1f")
    decision = row.decision
    # The operator's reason usually names the hold already ("hold: NoData: ..."); say it once.
    if row.held and row.held not in decision:
        decision = f"[{row.held}] {decision}"
    if row.clock is not None:
        decision = timescale.row_note(row.clock, time_scale) + decision
    line = (
        f"{row.t:6.0f} {row.offered:6.2f} {replicas:>8} {ttft + mark:>7} {attain:>6} "
        f"{_num(row.goodput, '.2f'):>7}  {decision}"
    )
    return line


def summary(
    rows: Sequence[Row],
    slo: Slo,
    gpus_per_replica: int,
    stats: dict[str, Any],
    time_scale: float = 1.0,
) -> list[str]:
    if not rows:
        return ["no samples"]
    desired = [r.desired for r in rows if r.desired is not None]
    ups = sum(1 for a, b in itertools.pairwise(desired) if b > a)
    downs = sum(1 for a, b in itertools.pairwise(desired) if b < a)
    gpu_hours = 0.0
    for a, b in itertools.pairwise(rows):
        gpu_hours += (a.pods * gpus_per_replica) * (b.t - a.t) / 3600
    lines = [
        f"simulated {rows[-1].t / 60:.1f} min: replicas {min(desired, default=0)} -> "
        f"{max(desired, default=0)} -> {desired[-1] if desired else 0} "
        f"({ups} scale-ups, {downs} scale-downs), {gpu_hours:.2f} GPU-hours",
        load_line(stats),
        f"requests: {stats['finished']} finished, {stats['failed']} failed; SLO attainment "
        f"{stats['attainment'] * 100:.1f}% (TTFT <= {slo.ttft_s * 1000:.0f} ms and TPOT <= "
        f"{slo.tpot_s * 1000:.0f} ms; the engines' histograms, a lower bound), goodput "
        f"{stats['goodput']:.2f} req/s",
    ]
    clocks = [r.clock for r in rows if r.clock is not None]
    if clocks:
        lines.append(timescale.verdict(clocks, time_scale, stats.get("worst_late_s", 0.0)))
    return lines


def load_line(stats: dict[str, Any]) -> str:
    """What the load generator was asked for, sent, and could not send (or sent late)."""
    scheduled, sent = int(stats["scheduled"]), int(stats["sent"])
    share = f" ({sent / scheduled * 100:.1f}%)" if scheduled else ""
    line = (
        f"load: {scheduled} arrivals drawn on the schedule (it asks for "
        f"{stats['expected']:.0f} on average), {sent} sent{share}"
    )
    missed = []
    if stats["no_endpoint"]:
        missed.append(f"{stats['no_endpoint']} with no ready replica")
    if stats["too_busy"]:
        missed.append(f"{stats['too_busy']} with {MAX_IN_FLIGHT} in flight")
    line += f"; not sent: {', '.join(missed)}" if missed else "; none left unsent"
    if stats["late"]:
        line += (
            f"; {stats['late']} sent more than {LATE_S:g} simulated s late (up to "
            f"{stats['worst_late_s']:.1f} s)"
        )
    return line
