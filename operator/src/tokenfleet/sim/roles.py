"""`tokenfleet sim --role prefill|decode`: one role of disaggregated serving, with the metrics
the engines export in that role. Pure apart from the Prometheus registry it writes.

- prefill: every request runs to its first token (llm-d's routing sidecar and vLLM's P/D
  proxy send it with max_tokens 1); the engine's usual series, under their usual names.
- decode: a request lands with its KV already there: the step timer charges its arrival as
  one more decoding sequence (capacity/disagg/roles.py DecodeTimer), the token budget does not
  chunk it, and vLLM's NIXL connector series record its transfer, as vLLM 0.32 names and
  buckets them (`vllm@0.32:vllm/distributed/kv_transfer/kv_connector/v1/nixl/stats.py`):
  `vllm:nixl_xfer_time_seconds` and `vllm:nixl_bytes_transferred`, one observation per
  request at the modelled transfer (capacity/disagg/link.py). SGLang's decode servers export
  no such series; a decode role of SGLang adds none.
The PodMonitor of a disaggregated LLMService puts `role` on every series (render), which is
how the autoscaler reads each pool apart.
"""

from __future__ import annotations

from dataclasses import dataclass

from prometheus_client import Histogram

from tokenfleet.scheduling.core import ScheduledStep, Scheduler, SimRequest, StepOutcome
from tokenfleet.sim.exporter import EngineMetrics

ROLES = ("prefill", "decode")
# nixl/stats.py: the transfer-time buckets (the first of its list is the post-time's only)
# and the bytes buckets, 2 KiB to 16 GiB by factors of 4.
XFER_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.2, 0.3, 0.5, 0.75, 1.0, 5.0)
BYTES_BUCKETS = tuple(float(2 ** (10 + i)) for i in range(1, 25, 2))


@dataclass(frozen=True)
class KvTransfer:
    """What one request's KV costs to move to this decode replica."""

    handoff_s: float
    bytes_per_token: int  # the larger rank's share (link.transfer_seconds)
    bytes_per_second: float

    def seconds(self, prompt_tokens: int) -> float:
        return self.handoff_s + self.bytes_per_token * prompt_tokens / self.bytes_per_second


class DecodeMetrics:
    """An engine's metrics plus vLLM's NIXL transfer series, observed as each request lands
    (its first token on this replica)."""

    def __init__(self, inner: EngineMetrics, transfer: KvTransfer, model_name: str) -> None:
        self.inner = inner
        self.registry = inner.registry
        self.transfer = transfer
        labels = ["model_name", "engine"]
        self.xfer_time = Histogram(
            "vllm:nixl_xfer_time_seconds",
            "Histogram of transfer duration for NIXL KV Cache transfers.",
            labels,
            buckets=list(XFER_BUCKETS),
            registry=self.registry,
        ).labels(model_name, "0")
        self.xfer_bytes = Histogram(
            "vllm:nixl_bytes_transferred",
            "Histogram of bytes transferred per NIXL KV Cache transfers.",
            labels,
            buckets=list(BYTES_BUCKETS),
            registry=self.registry,
        ).labels(model_name, "0")

    def on_step(self, step: ScheduledStep, outcome: StepOutcome, scheduler: Scheduler) -> None:
        self.inner.on_step(step, outcome, scheduler)
        for request in outcome.sampled:
            if len(request.token_times) == 1:
                self.xfer_time.observe(self.transfer.seconds(request.prompt_tokens))
                self.xfer_bytes.observe(self.transfer.bytes_per_token * request.prompt_tokens)

    def on_queue_change(self, scheduler: Scheduler) -> None:
        self.inner.on_queue_change(scheduler)

    def on_abort(self, request: SimRequest) -> None:
        self.inner.on_abort(request)

    def exposition(self) -> bytes:
        return self.inner.exposition()
