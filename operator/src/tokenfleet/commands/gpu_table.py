"""`--gpu a,b,c`: GPU types to compare (plan, autoscale-sim), and the comparison table."""

from __future__ import annotations

from tokenfleet.capacity.cost_choice import cost_per_million_good
from tokenfleet.capacity.gpu_choice import GpuCandidate, GpuChoice
from tokenfleet.capacity.gpus import get_gpu
from tokenfleet.errors import UserError


def parse_gpus(value: str, price: float | None = None) -> tuple[GpuCandidate, ...]:
    """`l4,h100-sxm=2.49`: catalog types, each with an optional price per GPU-hour. A lone
    type takes `price` (--price-per-gpu-hour); a list names each price by its type."""
    items = [item.strip() for item in value.split(",")]
    if not all(items):
        raise UserError("gpu", value, "has an empty entry", "write e.g. --gpu l4,l40s,h100-sxm")
    if len(items) > 1 and price is not None:
        raise UserError(
            "price-per-gpu-hour",
            price,
            "is one price, and --gpu names several types",
            f"give each type its price in --gpu, e.g. --gpu {items[0]}={price:g},{items[1]}",
        )
    out: list[GpuCandidate] = []
    for item in items:
        gpu_id, _, text = item.partition("=")
        gpu = get_gpu(gpu_id)
        if any(c.gpu.id == gpu.id for c in out):
            raise UserError("gpu", value, f"names {gpu.id} twice", "list each type once")
        own = price
        if text:
            try:
                own = float(text)
            except ValueError:
                own = -1.0
            if not own >= 0:
                raise UserError("gpu", item, "the price is not a number >= 0", "e.g. l4=0.70")
        out.append(GpuCandidate(gpu.with_price(own)))
    return tuple(out)


def choice_lines(choice: GpuChoice) -> list[str]:
    """The candidates, cheapest first; those left out last, with why."""
    fleet = choice.ranking == "fleet"
    head = f"    {'GPU':<24}{'layout':<14}{'$/GPU-h':>8}{'req/s/rep':>10}{'$/1M good':>10}" + (
        f"{'replicas':>9}{'GPUs':>6}{'$/hour':>9}{'p95 TTFT':>10}" if fleet else ""
    )
    what = (
        f"cheapest fleet for {choice.target_requests_per_second:g} req/s within the SLO"
        if fleet and choice.target_requests_per_second is not None
        else "lowest GPU cost per good request"
    )
    lines = ["", f"  GPU types     ranked by {what}", head]
    for r in choice.ranked:
        p = r.plan
        mark = "  <- chosen" if r is choice.chosen else ""
        mark = "  <- runner-up" if r is choice.runner_up else mark
        if p is None:
            lines.append(f"    {r.gpu.id:<24}{'-':<14}{r.gpu.price_per_hour:>8.2f}  {r.problem}")
            continue
        layout = f"TP {p.tensor_parallel_size} x PP {p.pipeline_parallel_size}"
        per_request = cost_per_million_good(p)
        row = (
            f"    {r.gpu.id:<24}{layout:<14}{r.gpu.price_per_hour:>8.2f}"
            f"{p.predicted.goodput_requests_per_second:>10.2f}{per_request:>10.2f}"
        )
        if fleet and p.fleet is not None:
            c = p.fleet.chosen
            row += f"{c.replicas:>9}{c.total_gpus:>6}{c.cost_per_hour:>9.2f}{c.ttft_p95_ms:>10.0f}"
        if r.problem is not None:
            row += f"  left out: {r.problem}"
        lines.append(row + mark)
    return lines
