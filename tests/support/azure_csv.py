"""Short traces in the Azure format for `tokenfleet autoscale-sim`, and its JSON output."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest

from tokenfleet.cli import main


def two_rate_csv(
    path: Path,
    seed: int,
    seconds: float,
    rate: float,
    burst_rate: float,
    burst: tuple[float, float],
) -> Path:
    """Poisson arrivals at `rate` req/s, at `burst_rate` from burst[0] to burst[1] s, for
    `seconds`; prompts of 200-2000 and outputs of 20-300 tokens (seeded)."""
    rng = random.Random(seed)
    rows, t = ["TIMESTAMP,ContextTokens,GeneratedTokens"], 0.0
    while t < seconds:
        t += rng.expovariate(burst_rate if burst[0] <= t < burst[1] else rate)
        rows.append(f"{t:.3f},{rng.randint(200, 2000)},{rng.randint(20, 300)}")
    path.write_text("\n".join(rows) + "\n")
    return path


def autoscale_sim_json(capsys: pytest.CaptureFixture[str], *argv: str) -> dict[str, Any]:
    """`tokenfleet autoscale-sim ARGV -o json`, which must exit 0, as parsed JSON."""
    assert main(["autoscale-sim", *argv, "-o", "json"]) == 0
    out: dict[str, Any] = json.loads(capsys.readouterr().out)
    return out
