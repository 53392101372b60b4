"""`tokenfleet sim --role`: a prefill server runs requests to their first token; a decode
server lands transferred requests (never a prefill chunk) and exports vLLM's NIXL transfer
series under vLLM 0.32's names and buckets."""

from __future__ import annotations

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.support.scheduler_runs import run_exported
from tests.support.sim_args import sim_args
from tokenfleet.capacity.disagg.roles import DecodeTimer
from tokenfleet.errors import UserError
from tokenfleet.scheduling.core import Scheduler, SimRequest
from tokenfleet.sim.exporter import metrics_for
from tokenfleet.sim.roles import DecodeMetrics
from tokenfleet.sim.setup import settings_from_args


def _run(settings, timer, metrics, prompts: list[int]) -> float:  # type: ignore[no-untyped-def]
    scheduler = Scheduler(settings.config, timer)
    for i, prompt in enumerate(prompts):
        scheduler.add(SimRequest(f"r{i}", prompt, 20, 0.0))
    return run_exported(scheduler, metrics)


def test_decode_role_lands_without_prefill_and_records_the_transfer() -> None:
    settings, timer, summary = settings_from_args(sim_args("--role", "decode"))
    assert isinstance(timer, DecodeTimer) and "role=decode" in summary
    assert settings.config.mixed_prefill and settings.kv_transfer is not None
    metrics = DecodeMetrics(metrics_for("vllm", "m", 4096), settings.kv_transfer, "m")
    decode_end = _run(settings, timer, metrics, [2000] * 8)
    plain, plain_timer, _ = settings_from_args(sim_args())
    aggregated_end = _run(plain, plain_timer, metrics_for("vllm", "m", 4096), [2000] * 8)
    assert decode_end < aggregated_end  # no prompt computed on the decode replica
    families = {f.name: f for f in text_string_to_metric_families(metrics.exposition().decode())}
    xfer = families["vllm:nixl_xfer_time_seconds"]
    count = next(s.value for s in xfer.samples if s.name.endswith("_count"))
    assert count == 8 and xfer.type == "histogram"
    total = next(s.value for s in xfer.samples if s.name.endswith("_sum"))
    assert total == pytest.approx(8 * settings.kv_transfer.seconds(2000))
    assert "vllm:nixl_bytes_transferred" in families


def test_prefill_role_keeps_the_plans_timing() -> None:
    settings, timer, _ = settings_from_args(sim_args("--role", "prefill"))
    assert settings.role == "prefill" and settings.kv_transfer is None
    assert not isinstance(timer, DecodeTimer)


def test_a_network_speed_without_the_decode_role_is_refused() -> None:
    with pytest.raises(UserError) as e:
        settings_from_args(sim_args("--kv-network-gbps", "100"))
    assert e.value.field == "kv-network-gbps"
