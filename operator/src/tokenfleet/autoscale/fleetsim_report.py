"""`tokenfleet autoscale-sim` output: the JSON contract, a table for people, and a plot."""

from __future__ import annotations

from typing import Any

from tokenfleet.autoscale.fleetsim_run import RunResult, Setup


def to_json(setup: Setup, results: dict[str, RunResult]) -> dict[str, Any]:
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
            "requests": len(setup.trace.requests),
            "durationSeconds": setup.trace.duration,
            "coldStartSeconds": o.cold_start,
            "slo": {"ttftMs": o.ttft_ms, "tpotMs": o.tpot_ms, "attainment": o.attainment},
            "capacityPredicted": round(setup.predicted_capacity, 3),
            "capacityError": o.capacity_error,
            "capacityMeasured": round(setup.measured_capacity, 3),
            "staticReplicas": setup.static_replicas,
            "maxReplicas": setup.max_replicas,
            "seed": o.seed,
        },
    }


def table(setup: Setup, results: dict[str, RunResult]) -> str:
    o = setup.options
    oracle = results.get("oracle")
    lines = [
        f"trace {setup.trace.name}: {len(setup.trace.requests):,} requests over "
        f"{setup.trace.duration / 60:.0f} min; {o.model} on {setup.shape.gpus} x {o.gpu}, "
        f"cold start {o.cold_start:g} s, SLO TTFT {o.ttft_ms:g} ms + TPOT {o.tpot_ms:g} ms",
        f"capacity per replica: plan {setup.predicted_capacity:.2f} req/s"
        + (f" x error {o.capacity_error:g}" if o.capacity_error != 1 else "")
        + f", measured {setup.measured_capacity:.2f} req/s at {o.attainment:.0%} attainment "
        f"(static, reactive and oracle use the measured one); max replicas {setup.max_replicas}",
        "",
        f"{'policy':<12}{'SLO attainment':>15}{'goodput req/s':>15}{'GPU-hours':>11}"
        f"{'vs oracle':>11}{'scale events':>14}",
    ]
    for name, r in results.items():
        versus = f"{r.gpu_hours / oracle.gpu_hours:.2f}x" if oracle and oracle.gpu_hours else "-"
        lines.append(
            f"{name:<12}{r.attainment:>15.2%}{r.goodput:>15.2f}{r.gpu_hours:>11.2f}"
            f"{versus:>11}{r.scale_events:>14}"
        )
    return "\n".join(lines)


def plot(setup: Setup, results: dict[str, RunResult], path: str) -> None:
    """Load, ready replicas and p95 TTFT over time, one line per policy."""
    import matplotlib

    matplotlib.use("Agg")  # files only: no display on servers and in CI
    import matplotlib.pyplot as plt

    fig, (load, replicas, ttft) = plt.subplots(3, 1, sharex=True, figsize=(10, 9))
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
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
