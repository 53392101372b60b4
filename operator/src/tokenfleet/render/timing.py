"""How long an engine pod may take to start, and to drain when it stops.

Startup: an engine is not healthy until the weights are downloaded (or read from a volume)
and loaded, the KV cache is profiled and CUDA graphs are captured. A startupProbe that gives
up earlier kills the pod mid-load and it never comes up, so its budget grows with the
weights each node loads: 10 minutes of fixed work plus 8 s per GiB (about 128 MiB/s, a
realistic Hub download or network-volume read), capped at two hours.

Drain: on scale-down or rollout the pod first leaves the Service's endpoints, then the
preStop hook waits while requests already running finish, and only then is the engine sent
SIGTERM (which drops whatever is still in flight). The wait covers a typical request of
the spec's workload at the SLO pace, twice over.
"""

from __future__ import annotations

import math

from tokenfleet.api import LLMService
from tokenfleet.capacity.types import GIB, Plan

STARTUP_BASE_SECONDS = 600
STARTUP_SECONDS_PER_GIB = 8
STARTUP_MAX_SECONDS = 7200
PROBE_PERIOD_SECONDS = 10
DRAIN_MIN_SECONDS = 15
DRAIN_MAX_SECONDS = 600
SIGTERM_GRACE_SECONDS = 30  # after preStop: the engine's own shutdown


def startup_seconds(plan: Plan) -> int:
    per_node_gib = plan.weights_total_bytes / GIB / max(plan.nodes_per_replica, 1)
    budget = STARTUP_BASE_SECONDS + STARTUP_SECONDS_PER_GIB * per_node_gib
    return int(min(STARTUP_MAX_SECONDS, math.ceil(budget / 60) * 60))


def startup_failure_threshold(plan: Plan) -> int:
    return math.ceil(startup_seconds(plan) / PROBE_PERIOD_SECONDS)


def drain_seconds(service: LLMService) -> int:
    slo, work = service.spec.slo, service.spec.workload
    request_ms = slo.ttft_ms + slo.tpot_ms * work.output_tokens
    seconds = math.ceil(2 * request_ms / 1000)
    return max(DRAIN_MIN_SECONDS, min(DRAIN_MAX_SECONDS, seconds))


def termination_grace_seconds(service: LLMService) -> int:
    return drain_seconds(service) + SIGTERM_GRACE_SECONDS
