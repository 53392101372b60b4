"""Printed engine numbers the memory model is fitted to (reference/engines.md), as data.

Each point is one engine start: its settings and what it logged ("GPU KV cache size: N
tokens" for vLLM, "max_total_num_tokens=N" for SGLang). `tokenfleet calibrate` prints the
model's prediction next to each; the unit tests hold every point within 2%.
"""

from __future__ import annotations

from dataclasses import dataclass

from tokenfleet.capacity.architecture import ModelArch
from tokenfleet.capacity.catalog import architecture_from_config, load_model
from tokenfleet.capacity.engine_profiles import modelled_kind
from tokenfleet.capacity.gpus import get_gpu
from tokenfleet.capacity.planner import plan
from tokenfleet.capacity.types import Plan, PlanRequest

# QwQ-32B is not in the catalog: its config.json (the Qwen2.5-32B architecture) from
# https://huggingface.co/Qwen/QwQ-32B/blob/main/config.json
QWQ_32B = {
    "architectures": ["Qwen2ForCausalLM"],
    "model_type": "qwen2",
    "hidden_size": 5120,
    "intermediate_size": 27648,
    "num_hidden_layers": 64,
    "num_attention_heads": 40,
    "num_key_value_heads": 8,
    "vocab_size": 152064,
    "max_position_embeddings": 131072,
    "tie_word_embeddings": False,
}


@dataclass(frozen=True)
class CalibrationPoint:
    engine: str
    version: str
    model: str
    gpu: str
    tp: int
    memory_fraction: float
    max_model_len: int
    printed_tokens: int
    printed_concurrency: float | None = None
    printed_kv_gib: float | None = None

    def arch(self) -> ModelArch:
        if self.model == "Qwen/QwQ-32B":
            return architecture_from_config(QWQ_32B, self.model)
        return load_model(self.model)

    def predict(self) -> Plan:
        gpu = get_gpu(self.gpu)
        return plan(
            PlanRequest(
                arch=self.arch(),
                gpu=gpu,
                engine=modelled_kind(self.engine),
                engine_version=self.version,
                tensor_parallel_size=self.tp,
                pipeline_parallel_size=1,
                memory_fraction=self.memory_fraction,
                max_model_len=self.max_model_len,
                # Those runs used the engine's default batch limits for the GPU.
                max_num_seqs=1024 if gpu.large else 256,
            )
        )


POINTS = (
    CalibrationPoint("vllm", "0.19.0", "meta-llama/Llama-3.1-8B", "h100-sxm", 1, 0.95, 8192,
                     476_016, printed_kv_gib=58.11),
    CalibrationPoint("vllm", "0.19.0", "Qwen/Qwen2.5-7B", "h100-sxm", 1, 0.95, 8192, 1_096_000,
                     printed_kv_gib=58.53),
    CalibrationPoint("vllm", "0.19.0", "mistralai/Mixtral-8x7B-v0.1", "h100-sxm", 2, 0.95, 8192,
                     465_936, printed_kv_gib=28.44),
    CalibrationPoint("vllm", "0.19.0", "google/gemma-3-27b-it", "h100-sxm", 1, 0.95, 8192, 36_560,
                     4.46, 19.53),
    CalibrationPoint("vllm", "0.9.2", "Qwen/Qwen3-8B", "a100-40gb", 1, 0.90, 40960, 136_080, 3.32,
                     18.69),
    CalibrationPoint("sglang", "0.4.3", "Qwen/QwQ-32B", "l4", 4, 0.85, 131072, 46_611),
)  # fmt: skip
