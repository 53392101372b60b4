"""autoscale-sim with prefix blocks: the per-replica prefix cache, Mooncake's hash_ids, and
affinity routing against round robin on a generated trace whose shared prefixes do not fit
in one replica's cache but do in the fleet's."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from tokenfleet.autoscale.fleetsim.fleet import Fleet
from tokenfleet.autoscale.fleetsim.policies import Static
from tokenfleet.autoscale.fleetsim.prefix import BLOCK_TOKENS, PrefixCache
from tokenfleet.autoscale.fleetsim.replica import FleetRequest
from tokenfleet.autoscale.fleetsim.run import SimOptions, prepare, run_policy
from tokenfleet.autoscale.fleetsim.traces import load_csv
from tokenfleet.cli import main
from tokenfleet.errors import UserError


def test_cache_hits_leading_blocks_only_and_evicts_least_recent() -> None:
    cache = PrefixCache(3 * BLOCK_TOKENS)
    assert cache.use([1, 2], 2 * BLOCK_TOKENS) == 0  # cold
    assert cache.leading([1, 2, 9]) == 2
    assert cache.leading([9, 1]) == 0  # leading blocks only: a miss ends the prefix
    # A full hit still computes the last token.
    assert cache.use([1, 2], 2 * BLOCK_TOKENS) == 2 * BLOCK_TOKENS - 1
    cache.use([3, 4], 2 * BLOCK_TOKENS)  # holds 3 blocks: 1, the least recent, goes
    assert cache.leading([1]) == 0
    assert cache.leading([2]) == cache.leading([3]) == cache.leading([4]) == 1


@pytest.mark.slow
def test_hit_skips_prefill_on_the_replica(short_fleet: Fleet) -> None:
    first = FleetRequest(0.0, 4 * BLOCK_TOKENS, 2, blocks=(1, 2, 3, 4))
    again = FleetRequest(10.0, 4 * BLOCK_TOKENS, 2, blocks=(1, 2, 3, 5))
    short_fleet.route(first, 0.0)
    short_fleet.advance(10.0)
    short_fleet.route(again, 10.0)
    short_fleet.finish(20.0)
    assert first.cached == 0 and again.cached == 3 * BLOCK_TOKENS
    assert again.ttft < first.ttft


@pytest.mark.slow
def test_affinity_sends_a_shared_prefix_where_it_is_cached(short_fleet: Fleet) -> None:
    short_fleet.routing = "affinity"
    short_fleet.start(1, 0.0, warm=True)  # two replicas
    a = FleetRequest(0.0, 2 * BLOCK_TOKENS, 2, blocks=(7, 8))
    short_fleet.route(a, 0.0)
    short_fleet.advance(5.0)
    b = FleetRequest(5.0, 2 * BLOCK_TOKENS, 2, blocks=(7, 9))
    c = FleetRequest(5.0, 2 * BLOCK_TOKENS, 2, blocks=(100, 101))
    short_fleet.route(b, 5.0)
    short_fleet.route(c, 5.0)  # no hit anywhere: the least loaded
    assert b.replica == a.replica
    assert c.replica != b.replica


@pytest.fixture
def short_fleet(tmp_path: Path) -> Fleet:
    setup = prepare(load_csv(_trace_file(tmp_path, groups=2, seconds=30)), SimOptions())
    fleet = Fleet(setup.shape, 0.0)
    fleet.start(1, 0.0, warm=True)
    return fleet


def _trace_file(
    directory: Path, groups: int, seconds: float, rate: float = 6.0, seed: int = 0
) -> Path:
    """Mooncake-style JSONL: each request opens with one of `groups` shared prefixes of 6
    blocks (a system prompt, a document, a conversation so far), then one block of its own."""
    rng = random.Random(seed)
    prefix = 6
    lines, t, own = [], 0.0, 10**6
    while (t := t + rng.expovariate(rate)) < seconds:
        group = rng.randrange(groups)
        own += 1
        blocks = [group * prefix + i for i in range(prefix)] + [own]
        line = {
            "timestamp": round(t * 1000),
            "input_length": prefix * BLOCK_TOKENS + rng.randint(100, BLOCK_TOKENS),
            "output_length": rng.randint(32, 128),
            "hash_ids": blocks,
        }
        lines.append(json.dumps(line))
    path = directory / f"prefix-{groups}-{seed}.jsonl"
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.mark.slow
def test_affinity_beats_round_robin_on_shared_prefixes(tmp_path: Path) -> None:
    # 120 prefixes x 6 blocks outgrow one replica's cache (kv tokens / 512 blocks) but not
    # a fleet's: round robin spreads every prefix over every replica and evicts it; affinity
    # keeps each on one. A loaded fixed fleet (a quarter of the static peak) so that the
    # prefill saved shows in TTFT.
    setup = prepare(load_csv(_trace_file(tmp_path, groups=120, seconds=300)), SimOptions())
    blocks = {b for r in setup.trace.requests for b in r.blocks[:6]}
    assert len(blocks) * BLOCK_TOKENS > setup.shape.config.kv_cache_tokens
    n = max(2, setup.static_replicas // 4)
    affinity = run_policy(setup, Static(n), "affinity")
    spread = run_policy(setup, Static(n), "round-robin")
    assert affinity.prefix_hit_rate > spread.prefix_hit_rate
    assert affinity.ttft_attainment > spread.ttft_attainment
    assert affinity.gpu_hours == pytest.approx(spread.gpu_hours, rel=0.01)  # same fleet


def test_hash_ids_are_read_and_bad_ones_dropped_or_refused(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    rows = [
        {"timestamp": 0, "input_length": 600, "output_length": 4, "hash_ids": [3, 4]},
        {"timestamp": 10, "input_length": 600, "output_length": 4},
        {"timestamp": 20, "input_length": 600, "output_length": 4, "hash_ids": "3,4"},
    ]
    path.write_text("\n".join(json.dumps(r) for r in rows))
    trace = load_csv(path)
    assert [r.blocks for r in trace.requests] == [(3, 4), ()]
    assert trace.dropped.counts == {"hash_ids is not a list of integer block ids": 1}
    with pytest.raises(UserError, match="line 3 hash_ids"):
        load_csv(path, strict=True)


@pytest.mark.slow
def test_cli_routing_compare_reports_both_routers(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    trace = _trace_file(tmp_path, groups=40, seconds=120)
    argv = ["autoscale-sim", "--trace", str(trace), "--policy", "static", "--no-frontier"]
    assert main([*argv, "--routing", "compare", "-o", "json"]) == 0
    routing = json.loads(capsys.readouterr().out)["routing"]
    assert set(routing) == {"affinity", "round-robin"}
    assert set(routing["affinity"]["static"]) == {
        "prefixCacheHitRate",
        "ttftAttainment",
        "sloAttainment",
        "gpuHours",
    }
    assert main([*argv, "--routing", "compare"]) == 0
    table = capsys.readouterr().out
    assert "hit rate" in table and "round-robin" in table
