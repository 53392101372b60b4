"""The engine registry: one record per engine kind, and the simulator and fleet simulator
export and read exactly the series and bucket bounds that record names."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tokenfleet.autoscale.fleetsim import observed as fleetsim_metrics
from tokenfleet.engines import ENGINES, PROGRAMS, REGISTRY, engine, engine_info
from tokenfleet.errors import UserError
from tokenfleet.scheduling.core import ScheduledStep, SimRequest, StepOutcome
from tokenfleet.sim.exporter import SglangMetrics, VllmMetrics


def _exposition(kind: str) -> str:
    """The simulator's /metrics after one two-token request (SGLang labels its request
    series by is_streaming, so they exist only once a request has been seen)."""
    metrics = VllmMetrics("m", 4096) if kind == "vllm" else SglangMetrics("m", 4096)
    request = SimRequest("r", prompt_tokens=8, max_tokens=2, arrival=0.0, scheduled_at=0.2)
    idle: Any = SimpleNamespace(running=[], waiting=[], kv_usage=0.0, used_tokens=0)
    for at, finished in ((1.0, ()), (1.5, (request,))):
        request.token_times.append(at)
        request.output_tokens = len(request.token_times)
        request.first_token_at = request.token_times[0]
        request.last_token_at = at
        if finished:
            request.finished_at = at
        step = ScheduledStep(at - 0.5, 0.5, ((request, 1),), 0, 1, 8, ())
        metrics.on_step(step, StepOutcome(at, (request,), finished), idle)
    return metrics.exposition().decode()


def _bucket_bounds(text: str) -> dict[str, tuple[float, ...]]:
    """Histogram base name -> its finite `le` bounds, as the exposition shows them."""
    bounds: dict[str, tuple[float, ...]] = {}
    for family in text_string_to_metric_families(text):
        if family.type != "histogram":
            continue
        les = [s.labels["le"] for s in family.samples if s.name.endswith("_bucket")]
        bounds[family.name] = tuple(float(le) for le in les if le != "+Inf")
    return bounds


def test_registry_holds_every_engine_and_the_old_tables_derive_from_it() -> None:
    assert set(REGISTRY) == {"vllm", "sglang"}
    for kind, record in REGISTRY.items():
        assert record.name == kind
        assert ENGINES[kind] is record.info
        assert PROGRAMS[kind] == record.program
        assert engine_info(kind) is record.info
        assert record.profile().version == record.default_version


def test_unknown_engine_is_one_error_naming_the_field() -> None:
    with pytest.raises(UserError) as raised:
        engine("tgi")
    assert "engine" in str(raised.value) and "tgi" in str(raised.value)


@pytest.mark.parametrize("kind", ["vllm", "sglang"])
def test_simulator_exports_the_registry_buckets(kind: str) -> None:
    exported = _bucket_bounds(_exposition(kind))
    record = engine(kind)
    # The series the autoscaler's queries read must be there, at the registry's bounds.
    for name in (record.metrics.ttft, record.metrics.e2e, record.metrics.queue_time):
        assert name in exported, name
    listed = {name: bounds for name, bounds in record.buckets.items() if name in exported}
    assert listed, kind
    for name, bounds in listed.items():
        assert exported[name] == tuple(float(b) for b in bounds), name


@pytest.mark.parametrize("kind", ["vllm", "sglang"])
def test_simulator_exports_the_registry_series_names(kind: str) -> None:
    samples = {s.name for f in text_string_to_metric_families(_exposition(kind)) for s in f.samples}
    names = engine(kind).metrics
    for name in (names.running, names.waiting, names.kv_usage[0], names.request_success,
                 names.prompt_tokens, names.generation_tokens):  # fmt: skip
        assert name in samples, name


def test_fleet_simulator_reads_the_vllm_registry_buckets() -> None:
    vllm = engine("vllm")
    assert vllm.buckets[vllm.metrics.ttft] == fleetsim_metrics.TTFT_BUCKETS
    assert vllm.buckets[vllm.metrics.queue_time] == fleetsim_metrics.QUEUE_BUCKETS
    assert vllm.buckets[vllm.metrics.itl[0]] == fleetsim_metrics.TPOT_BUCKETS
