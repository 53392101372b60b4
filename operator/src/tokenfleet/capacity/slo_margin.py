"""How much room the SLO leaves a replica: the warning plan() adds when the GPU barely meets it.

A lone request on an idle replica already spends part of each SLO (its prefill on TTFT, its
decode steps on TPOT). What is left is all the queueing and batching the replica may do
within the SLO, so when a lone request takes most of the SLO, the goodput capacity is a
small share of what the replica serves at saturation: the fleet buys GPUs for latency, not
throughput (Llama-3.1-70B on A100 at 500 ms: 0.16 of 3.20 req/s per replica, 13 replicas of
8 GPUs for 2 req/s). Both conditions must hold, so a tight SLO that still leaves the replica
most of its throughput, or a low goodput for another reason (a KV cache that holds few
requests), is not called barely met.
"""

from __future__ import annotations

from tokenfleet.capacity.types import Prediction
from tokenfleet.scheduling.virtual import LoadStats

LONE_SHARE = 0.5
"""A lone request that takes at least half an SLO leaves less for queueing and batching than
its own service time: the first request to wait behind another breaks it."""
GOODPUT_SHARE = 0.25
"""...and the SLO costs the replica at least 3/4 of its throughput (4x the GPUs a looser SLO
would need for the same load)."""


def barely_met(
    one: LoadStats, predicted: Prediction, ttft_slo_ms: float, tpot_slo_ms: float
) -> str | None:
    """The warning (one sentence with the numbers and the fix), or None."""
    goodput = predicted.goodput_requests_per_second
    saturation = predicted.saturation_requests_per_second
    if goodput <= 0 or saturation <= 0 or goodput >= GOODPUT_SHARE * saturation:
        return None
    spent = [
        (name, value, slo)
        for name, value, slo in (
            ("TTFT", one.ttft_p50 * 1e3, ttft_slo_ms),
            ("TPOT", one.tpot_p50 * 1e3, tpot_slo_ms),
        )
        if slo > 0 and value >= LONE_SHARE * slo
    ]
    if not spent:
        return None
    name, value, slo = max(spent, key=lambda s: s[1] / s[2])
    flag = "--ttft-slo-ms / slo.ttftMs" if name == "TTFT" else "--tpot-slo-ms / slo.tpotMs"
    return (
        f"the GPU barely meets the SLO: a lone request on an idle replica already takes "
        f"{value:.0f} ms of the {slo:g} ms {name} ({value / slo:.0%}), so a replica keeps the "
        f"SLO only up to {goodput:.2f} req/s, {goodput / saturation:.0%} of the "
        f"{saturation:.2f} req/s it serves at saturation; relax {flag}, shorten prompts, or "
        "use a faster GPU or more TP"
    )
