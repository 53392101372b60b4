"""`tokenfleet autoscale-sim` output: the JSON contract, a table for people, and a plot."""

from __future__ import annotations

from typing import Any

from tokenfleet.autoscale.attainability import targets
from tokenfleet.autoscale.fleetsim.frontier import FrontierPoint, cheapest_meeting
from tokenfleet.autoscale.fleetsim.peers import PEERS
from tokenfleet.autoscale.fleetsim.run import RunResult, Setup


def ceiling_line(setup: Setup) -> str:
    """The attainability verdict a person reads first."""
    o = setup.options
    share = 1 - setup.attainable
    if share <= 0:
        return "attainable: every request can meet the SLO on an idle replica"
    overall, _ = targets(o.attainment, setup.attainable)
    head = (
        f"attainable: {share:.2%} of requests cannot meet the SLO on an idle replica "
        f"(prompts over {setup.longest_prompt:,} tokens prefill longer than "
        f"ttft {o.ttft_ms:g} ms, or decode slower than tpot {o.tpot_ms:g} ms): the SLO can "
        f"reach at most {setup.attainable:.2%}"
    )
    if overall < o.attainment - 1e-9:
        head += f"; {o.attainment:.0%} is out of reach at any replica count, target {overall:.2%}"
    if setup.target < overall - 1e-9:
        head += (
            f"; baselines sized for {setup.target:.2%}, what a lightly loaded "
            "fleet reaches on this trace's bursts"
        )
    return head


def frontier_json(points: tuple[FrontierPoint, ...]) -> list[dict[str, Any]]:
    return [
        {
            "replicas": p.replicas,
            "sloAttainment": round(p.attainment, 4),
            "gpuHours": round(p.gpu_hours, 3),
        }
        for p in points
    ]


def frontier_table(setup: Setup, points: tuple[FrontierPoint, ...]) -> str:
    o = setup.options
    meets = cheapest_meeting(points, o.attainment)
    lines = ["", "static frontier (a fixed fleet of N replicas, warm from the start):"]
    lines.append(f"{'replicas':>10}{'SLO attainment':>16}{'GPU-hours':>11}")
    for p in points:
        mark = "  <- cheapest meeting the SLO" if meets is not None and p is meets else ""
        lines.append(f"{p.replicas:>10}{p.attainment:>16.2%}{p.gpu_hours:>11.2f}{mark}")
    if meets is None and points:
        best = max(points, key=lambda p: p.attainment)
        lines.append(
            f"no fixed fleet up to {points[-1].replicas} replicas meets {o.attainment:.0%}: "
            f"the best is {best.attainment:.2%} with {best.replicas}"
        )
    return "\n".join(lines)


def to_json(
    setup: Setup, results: dict[str, RunResult], points: tuple[FrontierPoint, ...] = ()
) -> dict[str, Any]:
    o = setup.options
    return {
        "trace": setup.trace.name,
        "policies": {
            name: {
                "sloAttainment": round(r.attainment, 4),
                "goodput": round(r.goodput, 3),
                "gpuHours": round(r.gpu_hours, 3),
                "scaleEvents": r.scale_events,
            }
            for name, r in results.items()
        },
        "setup": {
            "model": o.model,
            "gpu": o.gpu,
            "gpusPerReplica": setup.shape.gpus,
            # vLLM --long-prefill-token-threshold replayed (--cap-long-prefills); 0: none.
            "longPrefillTokenThreshold": setup.shape.config.long_prefill_token_threshold,
            "requests": len(setup.trace.requests),
            "durationSeconds": setup.trace.duration,
            "coldStartSeconds": o.cold_start,
            "slo": {"ttftMs": o.ttft_ms, "tpotMs": o.tpot_ms, "attainment": o.attainment},
            "capacityPredicted": round(setup.predicted_capacity, 3),
            "capacityPredictedAtMix": round(setup.mix_capacity, 3),
            "capacityError": o.capacity_error,
            "capacityMeasured": round(setup.measured_capacity, 3),
            "staticReplicas": setup.static_replicas,
            "maxReplicas": setup.max_replicas,
            "seed": o.seed,
            "attainable": round(setup.attainable, 4),
            "longestPromptWithinSlo": setup.longest_prompt,
            "baselineTarget": round(setup.target, 4),
            "droppedRows": dict(setup.trace.dropped.counts),
            "notes": list(setup.notes),
        },
        "staticFrontier": frontier_json(points),
        "peers": peers_json(setup, results),
    }


def peers_json(setup: Setup, results: dict[str, RunResult]) -> dict[str, Any]:
    """Each peer's configuration: its source, the thresholds it ran at and its sweep."""
    out: dict[str, Any] = {}
    for name, r in results.items():
        if name not in PEERS:
            continue
        peer = PEERS[name]
        out[name] = {
            "source": peer.source,
            "thresholds": dict(zip(peer.knobs, r.thresholds, strict=True)),
            "documented": dict(zip(peer.knobs, peer.documented, strict=True)),
            "chosenBy": setup.options.peer_thresholds,
            "sweep": [
                {
                    "thresholds": dict(zip(peer.knobs, values, strict=True)),
                    "sloAttainment": round(attainment, 4),
                    "gpuHours": round(hours, 3),
                }
                for values, attainment, hours in r.sweep
            ],
        }
    return out


def peer_lines(setup: Setup, results: dict[str, RunResult]) -> list[str]:
    """Under the table: each peer's configuration, its source and how it was chosen."""
    lines = []
    for name, r in results.items():
        if name not in PEERS:
            continue
        peer = PEERS[name]
        how = f"best of {len(r.sweep)} on this trace" if r.sweep else "as documented"
        lines.append(f"  {name:<8} {peer.describe(r.thresholds)} ({how}); {peer.source}")
    return ["", "peers:", *lines] if lines else []


def table(setup: Setup, results: dict[str, RunResult]) -> str:
    o = setup.options
    oracle = results.get("oracle")
    lines = [
        f"trace {setup.trace.name}: {len(setup.trace.requests):,} requests over "
        f"{setup.trace.duration / 60:.0f} min; {o.model} on {setup.shape.gpus} x {o.gpu}, "
        f"cold start {o.cold_start:g} s, SLO TTFT {o.ttft_ms:g} ms + TPOT {o.tpot_ms:g} ms",
        f"capacity per replica: plan {setup.predicted_capacity:.2f} req/s at the mean lengths "
        f"({setup.mix_capacity:.2f} at the trace's length mix)"
        + (f" x error {o.capacity_error:g}" if o.capacity_error != 1 else "")
        + f", measured {setup.measured_capacity:.2f} req/s at {setup.target:.2%} attainment "
        "(static, reactive, hold and oracle use the measured one); "
        f"max replicas {setup.max_replicas}",
        ceiling_line(setup),
        *setup.notes,
        "",
        f"{'policy':<14}{'SLO attainment':>15}{'goodput req/s':>15}{'GPU-hours':>11}"
        f"{'vs oracle':>11}{'scale events':>14}",
    ]
    for name, r in results.items():
        versus = f"{r.gpu_hours / oracle.gpu_hours:.2f}x" if oracle and oracle.gpu_hours else "-"
        lines.append(
            f"{name:<14}{r.attainment:>15.2%}{r.goodput:>15.2f}{r.gpu_hours:>11.2f}"
            f"{versus:>11}{r.scale_events:>14}"
        )
    return "\n".join(lines + peer_lines(setup, results))


def plot(
    setup: Setup,
    results: dict[str, RunResult],
    path: str,
    points: tuple[FrontierPoint, ...] = (),
) -> None:
    """Load, ready replicas and p95 TTFT over time, one line per policy; below, the static
    frontier (attainment against GPU-hours) with each policy's run as a point."""
    import matplotlib

    matplotlib.use("Agg")  # files only: no display on servers and in CI
    import matplotlib.pyplot as plt

    fig = plt.figure(figsize=(10, 12 if points else 9))
    rows = 4 if points else 3
    load = fig.add_subplot(rows, 1, 1)
    replicas = fig.add_subplot(rows, 1, 2, sharex=load)
    ttft = fig.add_subplot(rows, 1, 3, sharex=load)
    first = next(iter(results.values()))
    minutes = [p.at / 60 for p in first.timeline]
    load.plot(minutes, [p.load for p in first.timeline], color="black")
    load.set_ylabel("load (req/s, 1 min)")
    load.set_title(
        f"autoscale-sim: {setup.trace.name}, {setup.options.model} on {setup.options.gpu}"
    )
    for name, r in results.items():
        t = [p.at / 60 for p in r.timeline]
        replicas.step(t, [p.ready for p in r.timeline], where="post", label=name)
        ttft.plot(
            t,
            [p.ttft_p95 if p.ttft_p95 is not None else float("nan") for p in r.timeline],
            label=name,
        )
    replicas.set_ylabel("ready replicas")
    replicas.legend(loc="upper left", fontsize="small")
    ttft.axhline(setup.options.ttft_ms / 1000, color="grey", linestyle="--", label="TTFT SLO")
    ttft.set_yscale("log")
    ttft.set_ylabel("p95 TTFT (s, 1 min)")
    ttft.set_xlabel("minutes")
    ttft.legend(loc="upper left", fontsize="small")
    if points:
        front = fig.add_subplot(rows, 1, 4)
        front.plot(
            [p.gpu_hours for p in points],
            [p.attainment * 100 for p in points],
            marker="o",
            color="black",
            label="static frontier (N replicas)",
        )
        for p in points:
            front.annotate(str(p.replicas), (p.gpu_hours, p.attainment * 100), fontsize="x-small")
        for name, r in results.items():
            front.scatter([r.gpu_hours], [r.attainment * 100], label=name, zorder=3)
        front.axhline(setup.options.attainment * 100, color="grey", linestyle="--")
        if setup.attainable < 1:
            front.axhline(setup.attainable * 100, color="red", linestyle=":", label="attainable")
        low = min(p.attainment for p in points) * 100
        front.set_ylim(max(low, setup.target * 100 - 10), 100.2)
        front.set_xlabel("GPU-hours")
        front.set_ylabel("SLO attainment (%)")
        front.legend(loc="lower right", fontsize="small")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def routing_json(by_routing: dict[str, dict[str, RunResult]]) -> dict[str, Any]:
    return {
        routing: {
            name: {
                "prefixCacheHitRate": round(r.prefix_hit_rate, 4),
                "ttftAttainment": round(r.ttft_attainment, 4),
                "sloAttainment": round(r.attainment, 4),
                "gpuHours": round(r.gpu_hours, 3),
            }
            for name, r in results.items()
        }
        for routing, results in by_routing.items()
    }


def routing_table(by_routing: dict[str, dict[str, RunResult]]) -> str:
    """Each policy behind each router (--routing compare)."""
    lines = [
        "",
        "routing (prefix cache hit rate in prompt tokens, from the trace's prefix blocks):",
        f"{'routing':<13}{'policy':<12}{'hit rate':>10}{'TTFT attainment':>17}"
        f"{'SLO attainment':>16}{'GPU-hours':>11}",
    ]
    for routing, results in by_routing.items():
        for name, r in results.items():
            lines.append(
                f"{routing:<13}{name:<12}{r.prefix_hit_rate:>10.1%}{r.ttft_attainment:>17.2%}"
                f"{r.attainment:>16.2%}"
                f"{r.gpu_hours:>11.2f}"
            )
    return "\n".join(lines)
