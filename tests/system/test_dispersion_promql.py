"""signals.arrival_dispersion_query on a REAL Prometheus equals the pure
dispersion.index_of_dispersion on the same counts (the fleetsim path).

The first-token counters of two pods are backfilled with promtool (scraped every 15 s, the
PodMonitor's interval) from known counts per 30 s bin, so the expected value is exact."""

from __future__ import annotations

import random
import subprocess
import time
from pathlib import Path

import pytest

from tests.support.prometheus import running_prometheus
from tokenfleet.autoscale import dispersion
from tokenfleet.autoscale.signals import arrival_dispersion_query, selector
from tokenfleet.engines import engine_info

pytestmark = pytest.mark.system

WIDTH = int(dispersion.BIN_SECONDS)
BINS = int(dispersion.WINDOW_SECONDS) // WIDTH + 1  # 20 differences need 21 bins


def _backfill(workdir: Path, counts: list[int], start: int) -> None:
    name = engine_info("vllm").metrics.ttft + "_count"
    lines = []
    for pod, share in (("p0", 0.3), ("p1", 0.7)):
        total = 0
        for k, count in enumerate([0, *counts]):
            part = round(count * share)
            half = part // 2
            labels = f'{{namespace="ns",llmservice="chat",pod="{pod}"}}'
            # Half the bin's arrivals by the mid-bin scrape, the rest by its end.
            lines.append(f"{name}{labels} {total + half} {start + WIDTH * k - WIDTH // 2}")
            total += part
            lines.append(f"{name}{labels} {total} {start + WIDTH * k}")
    # One series per pod, in time order (promtool wants each series sorted).
    lines.sort(key=lambda line: (line.split("}")[0], int(line.rsplit(" ", 1)[1])))
    source = workdir / "counts.om"
    source.write_text("\n".join(lines) + "\n# EOF\n")
    subprocess.run(
        [
            "promtool",
            "tsdb",
            "create-blocks-from",
            "openmetrics",
            str(source),
            str(workdir / "tsdb"),
        ],
        check=True,
        capture_output=True,
    )


def test_promql_dispersion_matches_the_pure_function(tmp_path: Path) -> None:
    rng = random.Random(7)
    counts = [rng.choice((40, 60, 80, 200)) + rng.randint(0, 20) for _ in range(BINS)]
    # Bins end on multiples of 30 s (where Prometheus aligns a subquery's steps), 3 h ago.
    start = (int(time.time()) - 3 * 3600) // WIDTH * WIDTH
    _backfill(tmp_path, counts, start)
    end = start + WIDTH * BINS
    # What reaches Prometheus per bin: each pod's rounded share.
    seen = [round(c * 0.3) + round(c * 0.7) for c in counts]
    expected = dispersion.index_of_dispersion([float(c) for c in seen])
    assert expected is not None and expected > 2  # not a Poisson-looking window
    query = arrival_dispersion_query(engine_info("vllm").metrics, selector("ns", "chat"))
    with running_prometheus(tmp_path) as prom:
        samples = prom.query(query, at=float(end))
        assert len(samples) == 1
        assert samples[0].value == pytest.approx(expected, rel=1e-4)
        # Another LLMService's selector sees nothing; so does a window not yet full.
        other = arrival_dispersion_query(engine_info("vllm").metrics, selector("ns", "other"))
        assert prom.query(other, at=float(end)) == []
        assert prom.query(query, at=float(start + WIDTH * 4)) == []
