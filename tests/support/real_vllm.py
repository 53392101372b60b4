"""A REAL vLLM engine (the CPU build in the engines venv) serving a tiny random-weight Llama.

Used by tests that compare the simulator (or the bench client, or Prometheus rules) with
what a real engine does. Weights can't be downloaded here, so the model is made on the spot
(/work/shared/reference/real-engine-on-cpu.md): a 2-layer Llama with hidden 256 and 4 heads
(the CPU attention kernels reject head_dim 16; 64 works) and a WordLevel tokenizer trained on
a few sentences, both created by a script run with the engines venv's python, since the
project venv has neither torch nor transformers.

Start it once per test session through the `real_vllm` fixture in conftest.py.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx

REPO = Path(__file__).resolve().parents[2]
SERVED_NAME = "tiny-llama"
MAX_MODEL_LEN = 512
STARTUP_TIMEOUT_S = 240.0

MAKE_MODEL = r"""
import json, sys
from pathlib import Path
from tokenizers import Tokenizer, models, pre_tokenizers, trainers
from transformers import LlamaConfig, LlamaForCausalLM

out = Path(sys.argv[1])
out.mkdir(parents=True, exist_ok=True)
sentences = [
    "the quick brown fox jumps over the lazy dog",
    "a simulator behaves like a real engine under load",
    "tokens are generated one step at a time by the scheduler",
    "hello world how are you today my friend",
    "kubernetes runs the operator that scales the fleet",
] * 4
tok = Tokenizer(models.WordLevel(unk_token="<unk>"))
tok.pre_tokenizer = pre_tokenizers.Whitespace()
tok.train_from_iterator(
    sentences, trainers.WordLevelTrainer(special_tokens=["<unk>", "<s>", "</s>"])
)
tok.save(str(out / "tokenizer.json"))
(out / "tokenizer_config.json").write_text(json.dumps({
    "tokenizer_class": "PreTrainedTokenizerFast",
    "bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>",
    "model_max_length": 512,
    "chat_template": (
        "{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}"
        "{% if add_generation_prompt %}assistant:{% endif %}"
    ),
}))
(out / "special_tokens_map.json").write_text(json.dumps(
    {"bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>"}
))
config = LlamaConfig(
    vocab_size=max(tok.get_vocab_size(), 64), hidden_size=256, intermediate_size=512,
    num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=4,
    max_position_embeddings=512, bos_token_id=1, eos_token_id=2, tie_word_embeddings=False,
)
LlamaForCausalLM(config).save_pretrained(out)
print("made", out)
"""


def engines_python() -> str:
    """The engines venv's python, or an error telling how to make it."""
    python = os.environ.get("TOKENFLEET_ENGINES_PYTHON") or str(REPO / ".venv-engines/bin/python")
    if not Path(python).exists():
        raise RuntimeError(
            f"TOKENFLEET_ENGINES_PYTHON={python} does not exist: run `make engines` "
            "(it builds .venv-engines with the vLLM CPU build)"
        )
    probe = subprocess.run(
        [python, "-c", "import vllm, transformers, tokenizers"], capture_output=True, text=True
    )
    if probe.returncode != 0:
        raise RuntimeError(
            f"{python} cannot import vllm/transformers/tokenizers: run `make engines`\n"
            + probe.stderr[-2000:]
        )
    return python


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def make_tiny_model(python: str, directory: Path, script: str = MAKE_MODEL) -> Path:
    if (directory / "config.json").exists():
        return directory
    done = subprocess.run(
        [python, "-c", script, str(directory)],
        capture_output=True,
        text=True,
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
        timeout=600,
    )
    if done.returncode != 0:
        raise RuntimeError(f"making the tiny model failed:\n{done.stderr[-3000:]}")
    return directory


@dataclass
class RealVllm:
    """A running `python -m vllm.entrypoints.openai.api_server` on a loopback port."""

    model_dir: Path
    log_path: Path
    port: int = field(default_factory=free_port)
    served_name: str = SERVED_NAME
    max_model_len: int = MAX_MODEL_LEN
    process: subprocess.Popen[bytes] | None = None
    extra_args: tuple[str, ...] = ()
    # VLLM_CPU_KVCACHE_SPACE in GiB; None sizes the KV cache as the CPU worker does without
    # it: --gpu-memory-utilization of the node's memory less what the worker holds.
    kv_cache_space: str | None = "1"
    extra_env: tuple[tuple[str, str], ...] = ()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, python: str) -> None:
        env = {
            **{k: v for k, v in os.environ.items() if k != "VLLM_CPU_KVCACHE_SPACE"},
            "HF_HUB_OFFLINE": "1",
            "TRANSFORMERS_OFFLINE": "1",
            "VLLM_NO_USAGE_STATS": "1",
            "DO_NOT_TRACK": "1",
            **dict(self.extra_env),
        }
        if self.kv_cache_space is not None:
            env["VLLM_CPU_KVCACHE_SPACE"] = self.kv_cache_space
        command = [
            python, "-m", "vllm.entrypoints.openai.api_server",
            "--model", str(self.model_dir),
            "--served-model-name", self.served_name,
            "--host", "127.0.0.1",
            "--port", str(self.port),
            "--dtype", "float32",
            "--max-model-len", str(self.max_model_len),
            *self.extra_args,
        ]  # fmt: skip
        log = self.log_path.open("wb")
        # A new session, so stop() can end the engine core child processes with it.
        self.process = subprocess.Popen(
            command, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True
        )

    def log_tail(self, chars: int = 4000) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-chars:]
        except OSError:
            return "(no log)"

    def wait_ready(self, timeout: float = STARTUP_TIMEOUT_S) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            assert self.process is not None
            if self.process.poll() is not None:
                raise RuntimeError(
                    f"vLLM exited with {self.process.returncode} before it was ready; log tail:\n"
                    + self.log_tail()
                )
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(f"{self.base_url}/v1/models", timeout=2).status_code == 200:
                    return
            time.sleep(1.0)
        raise RuntimeError(
            f"vLLM did not answer /v1/models within {timeout:.0f} s; log tail:\n" + self.log_tail()
        )

    def stop(self) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGTERM)
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(timeout=10)


def start_real_vllm(workdir: Path) -> RealVllm:
    """Make the model (once) and start an engine; raises with the log tail on failure."""
    python = engines_python()
    model_dir = make_tiny_model(python, workdir / "tiny-llama")
    engine = RealVllm(model_dir=model_dir, log_path=workdir / "vllm.log")
    engine.start(python)
    try:
        engine.wait_ready()
    except BaseException:
        engine.stop()
        raise
    return engine


if __name__ == "__main__":  # manual use: python tests/support/real_vllm.py /tmp/dir
    target = Path(sys.argv[1] if len(sys.argv) > 1 else "/tmp/tokenfleet-real-vllm")
    target.mkdir(parents=True, exist_ok=True)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))  # so `finally` stops the engine
    started = start_real_vllm(target)
    print(f"ready at {started.base_url} (log {started.log_path}); Ctrl-C stops it")
    try:
        signal.pause()
    finally:
        started.stop()
