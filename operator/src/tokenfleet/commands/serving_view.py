"""`tokenfleet plan`'s lines for a serving decision: the roles, the KV transfer, the costs,
and at --target-rps both kinds of fleet in one table."""

from __future__ import annotations

import math
import shlex
from typing import Any

from tokenfleet.capacity.disagg.types import Role, ServingDecision
from tokenfleet.capacity.types import Plan


def _role_line(r: Role) -> str:
    tpot = f"{r.tpot_ms:8.1f}" if r.name == "decode" else f"{'-':>8}"
    return (
        f"    {r.name:<9}{r.layout:<14}{r.gpus:>5}{r.goodput_requests_per_second:>15.2f}"
        f"{r.saturation_requests_per_second:>12.2f}{r.ttft_budget_ms:>12.0f}"
        f"{r.ttft_p95_ms:>10.0f}{tpot}"
    )


def serving_lines(p: Plan) -> list[str]:
    s = p.serving
    if s is None:
        return []
    lines = [
        "",
        f"  serving       {s.mode} (asked: {s.asked})",
        f"    why         {s.why}",
    ]
    d = s.disaggregated
    if d is not None:
        lines += [
            f"    {'role':<9}{'layout':<14}{'GPUs':>5}{'goodput req/s':>15}{'saturation':>12}"
            f"{'TTFT share':>12}{'p95 ms':>10}{'TPOT ms':>8}   (per replica, at its goodput)",
            _role_line(d.prefill),
            _role_line(d.decode),
            f"    KV transfer {d.transfer_ms:.1f} ms per request over {d.link.label()}; "
            f"{d.prefill_per_decode:.2f} prefill replicas per decode replica at their goodput",
            f"    TTFT        p95 {d.ttft_p95_ms:.0f} ms = prefill {d.prefill.ttft_p95_ms:.0f} "
            f"+ transfer {d.transfer_ms:.1f} + decode landing {d.decode.ttft_p95_ms:.0f}, each "
            "at its goodput",
        ]
    elif s.unavailable:
        lines.append(f"    no pair     {s.unavailable}")
    lines += _fleet_table(s)
    return lines


def _fleet_table(s: ServingDecision) -> list[str]:
    f = s.aggregated_fleet
    d = s.disaggregated
    pd = d.fleet if d is not None else None
    if f is None and pd is None:
        return []
    target = f.target_requests_per_second if f is not None else pd.target_requests_per_second  # type: ignore[union-attr]
    lines = [
        "",
        f"  fleets        for {target:g} req/s within the SLO, both kinds",
        f"    {'kind':<15}{'layout':<36}{'GPUs':>6}{'$/hour':>10}",
    ]
    rows: list[tuple[float, str]] = []
    if f is not None:
        for o in (f.chosen, *f.alternatives):
            layout = f"{o.replicas} x TP {o.tensor_parallel_size} x PP {o.pipeline_parallel_size}"
            row = f"    {'aggregated':<15}{layout:<36}{o.total_gpus:>6}{o.cost_per_hour:>10.2f}"
            rows.append((o.cost_per_hour, row))
    if pd is not None and d is not None:
        layout = (
            f"{pd.prefill_replicas} x {d.prefill.layout} + {pd.decode_replicas} x {d.decode.layout}"
        )
        row = f"    {'disaggregated':<15}{layout:<36}{pd.total_gpus:>6}{pd.cost_per_hour:>10.2f}"
        rows.append((pd.cost_per_hour, row))
    cheapest = min(cost for cost, _ in rows) if rows else math.inf
    for cost, line in sorted(rows, key=lambda r: r[0]):
        lines.append(line + ("  <- cheapest" if cost == cheapest else ""))
    return lines


def add_role_commands(doc: dict[str, Any], p: Plan, model_ref: str) -> None:
    """A disaggregated plan's engine command per role (what the operator renders), under
    serving.disaggregated.<role>.engineCommand; the top-level engineCommand is the decode
    role's."""
    from tokenfleet.engines import Launch, ServingRole, engine_args, engine_command, engine_info
    from tokenfleet.engines.disagg import DECODE_PORT_OFFSET

    s = p.serving
    d = s.disaggregated if s is not None else None
    if s is None or d is None or p.request is None:
        return
    backend = p.request.serving.backend
    port = engine_info(p.engine).port
    for role in (d.prefill, d.decode):
        offset = DECODE_PORT_OFFSET if role.name == "decode" else 0
        launch = Launch(model_ref, serving=ServingRole(role.name, port + offset, backend))
        doc["serving"]["disaggregated"][role.name]["engineCommand"] = engine_command(
            role.plan, launch
        )
        if role.name == "decode" and s.mode == "disaggregated":
            doc["engineCommand"] = engine_command(role.plan, launch)
            doc["engineArgs"] = engine_args(role.plan, launch)


def command_lines(doc: dict[str, Any]) -> list[str]:
    d = (doc.get("serving") or {}).get("disaggregated")
    if not d or "engineCommand" not in d["prefill"] or doc["serving"]["mode"] != "disaggregated":
        return ["  command       " + shlex.join(doc["engineCommand"])]
    return [
        "  prefill       " + shlex.join(d["prefill"]["engineCommand"]),
        "  decode        " + shlex.join(d["decode"]["engineCommand"]),
    ]
