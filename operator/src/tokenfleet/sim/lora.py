"""LoRA adapters in the simulator: loaded, listed, named by requests, exported, and charged.

The answers copy the engines' (tokenfleet/engines/lora.py names the source):
- vLLM (entrypoints/openai/models/serving.py, 0.32.0): load answers 200 with a text body; a
  name already loaded, or the base model's, is 400 InvalidUserInput; nothing at the path is
  404 NotFoundError "Loading lora X failed: No adapter found for P"; a rank above
  --max-lora-rank fails the engine's add_lora (lora/peft_helper.py validate_legal), which
  the server answers 500; unload answers 200 or 404 "cannot be found". The endpoints exist
  only with VLLM_ALLOW_RUNTIME_LORA_UPDATING.
- SGLang (srt/managers/tokenizer_control_mixin.py, 0.5.23): 200 {"success": true, ...} or
  400 {"success": false, "error_message"}.

Where the files are: an absolute path is read as on the pod's filesystem, under --fs-root
when given (the local fleet maps a pod's volumes there); it must hold adapter_config.json,
whose "r" must fit --max-lora-rank. A relative path is a Hub repo id, which the engines
download themselves: the simulator takes it as found.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from prometheus_client import CollectorRegistry, Gauge

from tokenfleet.capacity.lora import DEFAULT_RANK
from tokenfleet.engines import engine as engine_record
from tokenfleet.engines.lora import SGLANG_POOL_METRICS, VLLM_INFO_LABELS, VLLM_INFO_METRIC
from tokenfleet.scheduling.core import (
    ScheduledStep,
    Scheduler,
    SimRequest,
    StepOutcome,
    StepTimer,
)
from tokenfleet.sim.exporter import EngineMetrics
from tokenfleet.sim.protocol import ApiError

MAX_CONFIG_BYTES = 1024**2


@dataclass(frozen=True)
class LoraSettings:
    slots: int  # adapters on the GPU at once (vLLM --max-loras)
    max_rank: int = DEFAULT_RANK
    runtime_updates: bool = True  # the load / unload endpoints exist
    fs_root: Path | None = None
    static: tuple[tuple[str, str], ...] = ()  # (name, path) loaded at start-up
    # The LoRA kernels' cost of a step with adapter requests (capacity/lora.py):
    # fixed_s + per_adapter_s x distinct adapters in the batch.
    fixed_s: float = 0.0
    per_adapter_s: float = 0.0


@dataclass(frozen=True)
class Outcome:
    """One answer of a load / unload endpoint."""

    status: int
    body: str | dict[str, Any]


@dataclass
class Adapters:
    """The adapters a simulated engine holds, and which request uses which."""

    engine: str
    served_model: str
    settings: LoraSettings
    loaded: dict[str, str] = field(default_factory=dict)  # name -> path, in load order
    pinned: set[str] = field(default_factory=set)
    _by_request: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for name, path in self.settings.static:
            outcome = self.load(name, path)
            if outcome.status != 200:
                raise ValueError(f"--lora-modules {name}={path}: {outcome.body}")

    # --- endpoints -----------------------------------------------------------------------

    def load(self, name: object, path: object, pinned: bool = False) -> Outcome:
        return _ENDPOINTS[self.engine][0](self, name, path, pinned)

    def unload(self, name: object) -> Outcome:
        return _ENDPOINTS[self.engine][1](self, name)

    def _vllm_load(self, name: object, path: object, pinned: bool) -> Outcome:
        if not name or not path:
            return _vllm(
                400, "Both 'lora_name' and 'lora_path' must be provided.", "InvalidUserInput"
            )
        name, path = str(name), str(path)
        if name == self.served_model:
            return _vllm(
                400,
                f"The lora adapter '{name}' conflicts with a served base model.",
                "InvalidUserInput",
            )
        if name in self.loaded:
            return _vllm(
                400,
                f"The lora adapter '{name}' has already been loaded. If you want to load the "
                "adapter in place, set 'load_inplace' to True.",
                "InvalidUserInput",
            )
        rank = self._rank(path)
        if rank is None:
            message = f"Loading lora {name} failed: No adapter found for {path}"
            return _vllm(404, message, "NotFoundError")
        if rank > self.settings.max_rank:
            message = f"LoRA rank {rank} is greater than max_lora_rank {self.settings.max_rank}."
            return _vllm(500, message, "InternalServerError")
        self.loaded[name] = path
        return Outcome(200, f"Success: LoRA adapter '{name}' added successfully.")

    def _sglang_unload(self, name: object) -> Outcome:
        if not name or str(name) not in self.loaded:
            return _sglang(False, f"LoRA adapter {name} is not loaded")
        self.loaded.pop(str(name))
        self.pinned.discard(str(name))
        return _sglang(True, None, self.loaded)

    def _vllm_unload(self, name: object) -> Outcome:
        if not name:
            return _vllm(
                400,
                "'lora_name' needs to be provided to unload a LoRA adapter.",
                "InvalidUserInput",
            )
        if str(name) not in self.loaded:
            return _vllm(404, f"The lora adapter '{name}' cannot be found.", "NotFoundError")
        self.loaded.pop(str(name))
        return Outcome(200, f"Success: LoRA adapter '{name}' removed successfully.")

    def _sglang_load(self, name: object, path: object, pinned: bool) -> Outcome:
        name, path = str(name or ""), str(path or "")
        if name in self.loaded:
            return _sglang(
                False, f"Failed to load LoRA adapter {name} because it is already loaded"
            )
        rank = self._rank(path)
        if rank is None:
            return _sglang(False, f"Failed to load LoRA adapter {name}: no adapter found at {path}")
        if rank > self.settings.max_rank:
            return _sglang(
                False,
                f"LoRA adapter {name} with rank {rank} is incompatible with the current LoRA "
                "memory pool configuration. Please ensure that the LoRA adapter's rank is within "
                "the configured `--max-lora-rank` and that the target modules are included in "
                "`--lora-target-modules`.",
            )
        # mem_pool / lora_manager: pinned adapters may not take every slot of the batch.
        if pinned and len(self.pinned) >= self.settings.slots:
            return _sglang(
                False,
                f"Failed to load LoRA adapter {name} as a pinned adapter. It is not allowed to "
                "pin all slots in the LoRA memory pool to avoid starvation for unpinned "
                "adapters and base models. Please increase your `--max-loras-per-batch` or "
                "load it as unpinned LoRA adapters.",
            )
        self.loaded[name] = path
        if pinned:
            self.pinned.add(name)
        return _sglang(True, None, self.loaded)

    def _rank(self, path: str) -> int | None:
        """The adapter's rank, or None when no adapter is at `path`."""
        if not path.startswith("/"):
            return DEFAULT_RANK if "/" in path else None  # a Hub repo id: org/name
        root = self.settings.fs_root
        local = Path(str(root) + path) if root is not None else Path(path)
        config = local / "adapter_config.json"
        try:
            if config.stat().st_size > MAX_CONFIG_BYTES:
                return None
            doc = json.loads(config.read_text())
        except (OSError, ValueError):
            return None
        rank = doc.get("r") if isinstance(doc, dict) else None
        return rank if isinstance(rank, int) and rank > 0 else DEFAULT_RANK

    # --- requests ------------------------------------------------------------------------

    def resolve(self, model: str) -> str | None:
        """The adapter a request's `model` names (None: the base model); raises the engine's
        error for an adapter that is not loaded."""
        separator = engine_record(self.engine).adapter_separator
        if separator is not None:
            prefix = f"{self.served_model}{separator}"
            if not model.startswith(prefix):
                return None
            adapter = model[len(prefix) :]
            if adapter not in self.loaded:
                raise ApiError(400, f"LoRA adapter {adapter} is not loaded.", "BadRequestError")
            return adapter
        return model if model in self.loaded else None

    def tag(self, request: SimRequest, adapter: str | None) -> None:
        if adapter is not None:
            self._by_request[request.request_id] = adapter

    def forget(self, request: SimRequest) -> None:
        self._by_request.pop(request.request_id, None)

    def adapters_of(self, requests: Iterable[SimRequest]) -> list[str]:
        """Distinct adapters of `requests`, in order of first use."""
        seen: dict[str, None] = {}
        for request in requests:
            adapter = self._by_request.get(request.request_id)
            if adapter is not None:
                seen[adapter] = None
        return list(seen)

    def cards(self) -> list[dict[str, Any]]:
        """/v1/models entries of the loaded adapters (show_available_models)."""
        now = int(time.time())
        return [
            {
                "id": name,
                "object": "model",
                "created": now,
                "owned_by": self.engine,
                "root": path,
                "parent": self.served_model,
                "max_model_len": None,
                "permission": [],
            }
            for name, path in self.loaded.items()
        ]


# The simulator's copy of each engine's load and unload endpoints (module docstring).
_ENDPOINTS: dict[
    str,
    tuple[
        Callable[[Adapters, object, object, bool], Outcome], Callable[[Adapters, object], Outcome]
    ],
] = {
    "vllm": (Adapters._vllm_load, Adapters._vllm_unload),
    "sglang": (Adapters._sglang_load, Adapters._sglang_unload),
}


def _vllm(status: int, message: str, err_type: str) -> Outcome:
    return Outcome(status, ApiError(status, message, err_type).body("vllm"))


def _sglang(success: bool, error: str | None, loaded: dict[str, str] | None = None) -> Outcome:
    body: dict[str, Any] = {
        "success": success,
        "error_message": error,
        "loaded_adapters": dict(loaded) if loaded is not None else None,
    }
    return Outcome(200 if success else 400, body)


class LoraGauges:
    """The engine's LoRA series: vLLM's `vllm:lora_requests_info` (a gauge set to the time of
    the update, one series per label set, as v1/metrics/loggers.py does), SGLang's pool
    gauges."""

    def __init__(
        self,
        engine: str,
        registry: CollectorRegistry,
        slots: int,
        labels: dict[str, str],
    ) -> None:
        self.engine = engine
        self.slots = slots
        self._info: Gauge | None = None
        self._pool: list[Gauge] = []
        if not engine_record(engine).lora_pool_gauges:
            self._info = Gauge(
                VLLM_INFO_METRIC,
                "Running stats on lora requests.",
                list(VLLM_INFO_LABELS),
                registry=registry,
            )
        else:
            docs = ("slots currently occupied", "slots available", "pool utilization")
            self._pool = [
                Gauge(name, f"LoRA adapter {doc}.", list(labels), registry=registry)
                for name, doc in zip(SGLANG_POOL_METRICS, docs, strict=True)
            ]
            self._labels = labels

    def update(self, running: list[str], waiting: list[str]) -> None:
        if self._info is not None:
            self._info.labels(
                max_lora=str(self.slots),
                waiting_lora_adapters=",".join(waiting),
                running_lora_adapters=",".join(running),
            ).set_to_current_time()
            return
        total = self.slots + 1  # --max-loras-per-batch: the base model takes a slot
        used = min(len(running), self.slots)
        values = (used, total, used / total)
        for gauge, value in zip(self._pool, values, strict=True):
            gauge.labels(**self._labels).set(value)


class LoraTimer:
    """The step model plus the LoRA kernels' cost (capacity/lora.py step_seconds) on the
    steps whose batch holds adapter requests, by how many distinct adapters it holds."""

    def __init__(self, base: StepTimer, adapters: Adapters, fixed_s: float, per_adapter_s: float):
        self.base = base
        self.adapters = adapters
        self.fixed_s = fixed_s
        self.per_adapter_s = per_adapter_s
        self.scheduler: Scheduler | None = None  # set once the scheduler exists

    def step_seconds(
        self,
        prefill_tokens: int,
        decode_seqs: int,
        decode_context_tokens: int,
        prefill_attention_pairs: float | None = None,
    ) -> float:
        seconds = self.base.step_seconds(
            prefill_tokens, decode_seqs, decode_context_tokens, prefill_attention_pairs
        )
        if self.scheduler is None:
            return seconds
        active = len(self.adapters.adapters_of(self.scheduler.running))
        if active:
            seconds += self.fixed_s + active * self.per_adapter_s
        return seconds


class LoraMetrics:
    """An engine's metrics with its LoRA series kept current after every change."""

    def __init__(self, inner: EngineMetrics, adapters: Adapters, gauges: LoraGauges) -> None:
        self.inner = inner
        self.registry = inner.registry
        self.adapters = adapters
        self.gauges = gauges

    def _update(self, scheduler: Scheduler) -> None:
        self.gauges.update(
            self.adapters.adapters_of(scheduler.running),
            self.adapters.adapters_of(scheduler.waiting),
        )

    def on_step(self, step: ScheduledStep, outcome: StepOutcome, scheduler: Scheduler) -> None:
        self.inner.on_step(step, outcome, scheduler)
        self._update(scheduler)

    def on_queue_change(self, scheduler: Scheduler) -> None:
        self.inner.on_queue_change(scheduler)
        self._update(scheduler)

    def on_abort(self, request: SimRequest) -> None:
        self.inner.on_abort(request)

    def exposition(self) -> bytes:
        return self.inner.exposition()
