"""The demo's PNG: offered load and goodput, replicas desired / ready, and the TTFT quantile
against the SLO, over simulated time (matplotlib, Agg backend: no display needed)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from tokenfleet.localfleet.observe import Row, Slo


def plot(rows: Sequence[Row], slo: Slo, title: str, path: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    t = [r.t / 60 for r in rows]
    fig, (load_ax, rep_ax, ttft_ax) = plt.subplots(3, 1, sharex=True, figsize=(9, 8))
    load_ax.plot(t, [r.offered for r in rows], label="offered load", color="tab:gray")
    load_ax.plot(t, [r.goodput or 0.0 for r in rows], label="goodput (met the SLO)")
    load_ax.set_ylabel("requests / s")
    load_ax.legend(loc="upper right")
    load_ax.set_title(title)
    rep_ax.step(t, [r.desired or 0 for r in rows], where="post", label="desired (spec.replicas)")
    rep_ax.step(t, [r.ready or 0 for r in rows], where="post", label="ready")
    rep_ax.set_ylabel("replicas")
    rep_ax.yaxis.get_major_locator().set_params(integer=True)
    rep_ax.legend(loc="upper right")
    ttft = [None if r.ttft_quantile_s is None else r.ttft_quantile_s * 1000 for r in rows]
    ttft_ax.plot(
        t,
        [float("nan") if v is None else v for v in ttft],
        label=f"TTFT p{slo.quantile * 100:g} (Prometheus)",
    )
    ttft_ax.axhline(slo.ttft_s * 1000, color="tab:red", linestyle="--", label="SLO")
    ttft_ax.set_yscale("log")  # a cold-start backlog is 100x the SLO; keep the SLO visible
    ttft_ax.set_ylabel("ms")
    ttft_ax.set_xlabel("simulated minutes")
    ttft_ax.legend(loc="upper right")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path
