"""Fleet sizing: how many replicas of which layout serve a target request rate within the SLO.

Each candidate layout is planned as one replica (its goodput capacity comes from the
virtual scheduler runs); a layout serving R req/s needs ceil(R / goodput) replicas. The
objective picks: cost (default) takes the cheapest fleet per hour, then the fewest GPUs;
latency takes the lowest p95 TTFT with the target rate spread over the replicas (each
option is run open-loop at target / replicas). With one price per GPU the
cheapest fleet is the one with the fewest GPUs, and min over layouts of
GPUs x ceil(R / goodput) never falls as R grows: more load never needs fewer GPUs.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from tokenfleet.capacity.errors import PlanError
from tokenfleet.capacity.load import GOODPUT_ATTAINMENT, Replica, open_
from tokenfleet.capacity.prefix import prefill_tokens
from tokenfleet.capacity.types import Fleet, FleetOption, Objective, Plan
from tokenfleet.scheduling.virtual import LoadStats


def _at_rate(p: Plan, rate: float) -> LoadStats:
    """One replica of plan `p` (the replica it renders) under Poisson arrivals at `rate`
    (the target spread evenly)."""
    from tokenfleet.capacity import step_model  # the package imports this module

    req = p.request
    assert req is not None
    replica = Replica.for_plan(p)
    e2e_s = (p.predicted.ttft_ms + p.predicted.tpot_ms * req.output_tokens) / 1e3
    slo = (req.ttft_slo_ms / 1e3, req.tpot_slo_ms / 1e3)
    prefill = prefill_tokens(req.input_tokens, req.prefix_cache_hit_rate)
    return open_(step_model(p), replica, rate, prefill, req.output_tokens, slo, rate * e2e_s * 2)


# Replicas a layout may get beyond target / goodput when the run at the target rate misses
# the SLO (see option_for); past that the layout is left out, as one with no goodput is.
MAX_EXTRA_REPLICAS = 2


def _within_slo(stats: LoadStats) -> bool:
    """The goodput search's test of a run (load.goodput_capacity): sustained, and
    GOODPUT_ATTAINMENT of its requests within both SLOs."""
    return not stats.saturated and stats.attainment >= GOODPUT_ATTAINMENT


def option_for(p: Plan, target_rps: float) -> FleetOption | None:
    """`p`'s layout sized for `target_rps`: ceil(target / goodput) replicas, run open-loop at
    the target spread over them. The goodput search brackets its rate on one seeded run per
    rate, so a run at a lower rate can still miss the SLO (gpt-oss-120b on H100, TP 2 at
    20 of its 20.9 req/s: p95 TTFT 551 ms against 500); a row says its TTFT and TPOT at the
    target hold the SLO, so such a layout gets another replica until its run meets it (the
    goodput search's own test: GOODPUT_ATTAINMENT of the requests within both SLOs). None:
    no goodput, or still missing with MAX_EXTRA_REPLICAS more."""
    goodput = p.predicted.goodput_requests_per_second
    if goodput <= 0:
        return None
    replicas = max(1, math.ceil(target_rps / goodput - 1e-9))
    price = p.gpu.price_per_hour
    at_load = _at_rate(p, target_rps / replicas)
    for _ in range(MAX_EXTRA_REPLICAS):
        if _within_slo(at_load):
            break
        replicas += 1
        at_load = _at_rate(p, target_rps / replicas)
    if not _within_slo(at_load):
        return None
    return FleetOption(
        tensor_parallel_size=p.tensor_parallel_size,
        pipeline_parallel_size=p.pipeline_parallel_size,
        gpus_per_replica=p.gpus_per_replica,
        replicas=replicas,
        goodput_requests_per_second=goodput,
        ttft_p95_ms=at_load.ttft_p95 * 1e3,
        tpot_ms=at_load.tpot_p50 * 1e3,
        ttft_p95_at_capacity_ms=p.predicted.goodput_ttft_p95_ms,
        cost_per_hour=replicas * p.gpus_per_replica * price,
        # GPU cost of a million good requests with every replica at its goodput capacity.
        cost_per_million_good_requests=p.gpus_per_replica * price / (goodput * 3600) * 1e6,
    )


def size_fleet(
    plans: Sequence[Plan], target_rps: float, objective: Objective
) -> tuple[Plan, Fleet]:
    """The chosen layout's plan and the fleet; raises PlanError when no layout meets the SLO."""
    options = [(o, p) for p in plans if (o := option_for(p, target_rps)) is not None]
    if not options:
        raise PlanError(
            "target-rps",
            target_rps,
            "no layout serves even one request within the SLO at this request shape",
            "relax --ttft-slo-ms / --tpot-slo-ms, shorten prompts, or use a faster GPU",
        )
    if objective == "latency":
        options.sort(key=lambda op: (op[0].ttft_p95_ms, op[0].cost_per_hour))
    else:
        options.sort(
            key=lambda op: (
                op[0].cost_per_hour,
                op[0].total_gpus,
                op[0].cost_per_million_good_requests,
            )
        )
    chosen, chosen_plan = options[0]
    rest = [o for o, _ in options[1:]]
    which = "latency: lowest p95 TTFT" if objective == "latency" else "cost: cheapest fleet"
    reason = (
        f"objective {which} for {target_rps:g} req/s within the SLO: {chosen.replicas} x "
        f"TP {chosen.tensor_parallel_size} x PP {chosen.pipeline_parallel_size} = "
        f"{chosen.total_gpus} GPU(s), ${chosen.cost_per_hour:.2f}/h"
    )
    if rest:
        alt = rest[0]
        reason += (
            f"; next: {alt.replicas} x TP {alt.tensor_parallel_size} x PP "
            f"{alt.pipeline_parallel_size} = {alt.total_gpus} GPU(s), ${alt.cost_per_hour:.2f}/h"
        )
    return chosen_plan, Fleet(target_rps, chosen, tuple(rest), reason)
