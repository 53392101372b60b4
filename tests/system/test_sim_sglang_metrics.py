"""The simulator's SGLang metric families against SGLang's own collectors.

SGLang has no CPU path here, so no real SGLang server can run. Instead SGLang's
`observability/metrics_collector.py` (installed --no-deps in the engines venv) is loaded with
its heavy runtime imports stubbed, its Tokenizer and Scheduler collectors are constructed as
a server with --enable-metrics does, and their exposition is compared with the simulator's:
same names, types, label names and histogram buckets for every family the simulator emits.
"""

from __future__ import annotations

import subprocess
from typing import Any

import pytest
from prometheus_client import generate_latest

from tests.support.metric_families import families
from tests.support.real_vllm import engines_python
from tokenfleet.sim.exporter import SglangMetrics

pytestmark = [pytest.mark.system, pytest.mark.engines]

DUMP_SGLANG_METRICS = r"""
import importlib.util, os, sys
from unittest import mock
import sglang
from prometheus_client import REGISTRY, generate_latest

root = os.path.join(os.path.dirname(sglang.__file__), "srt", "observability")
# Modules whose imports pull CUDA / vision stacks; the collectors only need a few names.
for name in ("sglang.srt.disaggregation.utils", "sglang.srt.model_executor.forward_batch_info",
             "sglang.srt.runtime_context", "sglang.srt.server_args", "sglang.srt.utils",
             "sglang.srt.utils.gauge_histogram",
             "sglang.srt.observability.scheduler_stage_metrics"):
    sys.modules[name] = mock.MagicMock()
sys.modules["sglang.srt.disaggregation.utils"].DisaggregationMode.to_engine_type = (
    lambda mode: "unified")
runtime = sys.modules["sglang.srt.runtime_context"]
observability = mock.MagicMock(prompt_tokens_buckets=None, generation_tokens_buckets=None)
runtime.get_observability = lambda: observability
schedule = mock.MagicMock(prefill_delayer_max_delay_passes=30,
                          prefill_delayer_forward_passes_buckets=None,
                          prefill_delayer_wait_seconds_buckets=None)
runtime.get_schedule = lambda: schedule

def load(name, path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module

load("sglang.srt.observability.utils", os.path.join(root, "utils.py"))
collectors = load("sglang_metrics_collector", os.path.join(root, "metrics_collector.py"))
labels = {"model_name": "m", "engine_type": "unified"}
collectors.TokenizerMetricsCollector(labels=labels)
collectors.SchedulerMetricsCollector(
    labels={**labels, "tp_rank": 0, "pp_rank": 0, "moe_ep_rank": 0}, server_args=mock.MagicMock()
)
# One child per family, so every family shows its label names and buckets.
for collector in list(REGISTRY._collector_to_names):
    names = getattr(collector, "_labelnames", ())
    if names:
        collector.labels(*["x"] * len(names))
sys.stdout.write(generate_latest(REGISTRY).decode())
"""


def materialize(registry: Any) -> None:
    for collector in list(registry._collector_to_names):
        names = getattr(collector, "_labelnames", ())
        if names:
            collector.labels(*["x"] * len(names))


def test_sglang_families_match_sglangs_own_collectors() -> None:
    try:
        python = engines_python()
    except RuntimeError as error:
        pytest.fail(str(error), pytrace=False)
    done = subprocess.run(
        [python, "-c", DUMP_SGLANG_METRICS], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-3000:]
    real = families(done.stdout, "sglang:")
    sim_metrics = SglangMetrics("m", 4096)
    materialize(sim_metrics.registry)
    sim = families(generate_latest(sim_metrics.registry).decode(), "sglang:")

    problems = []
    for name, mine in sorted(sim.items()):
        theirs = real.get(name)
        if theirs is None:
            problems.append(f"{name}: SGLang has no such family")
        elif mine != theirs:
            problems.append(f"{name}: simulator {mine} != SGLang {theirs}")
    print(f"\nsimulator emulates {len(sim)} of {len(real)} sglang: families; not emulated:")
    print(*sorted(set(real) - set(sim)), sep="\n  ")
    assert not problems, "\n".join(problems)
    assert len(sim) >= 15
