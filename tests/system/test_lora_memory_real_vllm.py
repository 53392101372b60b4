"""The plan's LoRA memory against a REAL vLLM engine (the CPU build): the KV cache the engine
sizes with `--enable-lora --max-loras N --max-lora-rank R`, against without, for two
settings, and the plan's prediction of that difference for the same model config.

Each engine sizes its KV cache from a budget less what it holds; the budget (node memory x
--gpu-memory-utilization) moves with the machine's memory, so the runs are compared at the
same budget: the difference in what each holds besides the KV cache, which is the KV cache
the slots take away (tests/support/lora_engine.py). Three engine starts, one after the other.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.lora_engine import MAKE_WIDE_MODEL, KvReport, kv_report
from tests.support.real_vllm import RealVllm, engines_python, make_tiny_model
from tokenfleet.capacity import PlanRequest, get_gpu, parse_config, plan
from tokenfleet.capacity.lora import LoraRequest

pytestmark = [pytest.mark.system, pytest.mark.engines]

# (max_loras, max_lora_rank): about 0.5 and 1 GiB of fp32 buffers on the wide model, far
# above what the worker's memory reading wobbles by between runs.
SETTINGS = ((4, 256), (16, 128))
MEMORY_FRACTION = "0.3"


def _bytes_per_token(config: dict[str, int]) -> int:
    """fp32 KV (the engine's KV dtype follows --dtype float32 on CPU)."""
    head_dim = config["hidden_size"] // config["num_attention_heads"]
    return 2 * config["num_hidden_layers"] * config["num_key_value_heads"] * head_dim * 4


@pytest.fixture(scope="module")
def wide_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_tiny_model(
        engines_python(), tmp_path_factory.mktemp("lora-memory") / "wide", MAKE_WIDE_MODEL
    )


def _logged(model_dir: Path, log_path: Path, *args: str) -> str:
    engine = RealVllm(
        model_dir=model_dir,
        log_path=log_path,
        served_name="wide",
        kv_cache_space=None,
        extra_args=("--gpu-memory-utilization", MEMORY_FRACTION, *args),
    )
    engine.start(engines_python())
    try:
        engine.wait_ready()
    finally:
        engine.stop()
    return log_path.read_text(errors="replace")


@pytest.fixture(scope="module")
def reports(wide_model: Path) -> dict[tuple[int, int] | None, KvReport]:
    # Compilation off as LoRA turns it off on the CPU platform (lora_engine.py).
    out: dict[tuple[int, int] | None, KvReport] = {
        None: kv_report(
            _logged(
                wide_model, wide_model.parent / "base.log", "--compilation-config", '{"mode": 0}'
            )
        )
    }
    for slots, rank in SETTINGS:
        log = _logged(
            wide_model,
            wide_model.parent / f"lora-{slots}-{rank}.log",
            "--enable-lora", "--max-loras", str(slots), "--max-lora-rank", str(rank),
        )  # fmt: skip
        out[(slots, rank)] = kv_report(log)
    return out


@pytest.mark.parametrize(("slots", "rank"), SETTINGS, ids=lambda v: str(v))
def test_kv_cache_shrinks_by_what_the_plan_predicts(
    reports: dict[tuple[int, int] | None, KvReport], wide_model: Path, slots: int, rank: int
) -> None:
    config = json.loads((wide_model / "config.json").read_text())
    per_token = _bytes_per_token(config)
    measured = reports[(slots, rank)].consumed_bytes(per_token) - reports[None].consumed_bytes(
        per_token
    )
    arch = parse_config(config, "wide", "wide config.json")
    request = PlanRequest(
        arch=arch, gpu=get_gpu("h100-sxm"), dtype="float32", tensor_parallel_size=1,
        max_model_len=512, concurrency=1, input_tokens=256, output_tokens=64,
    )  # fmt: skip
    bare = plan(request)
    with_slots = plan(
        PlanRequest(**{**request.__dict__, "lora": LoraRequest(slots=slots, max_rank=rank)})
    )
    predicted = with_slots.memory.lora
    predicted_kv = (bare.kv_cache_tokens - with_slots.kv_cache_tokens) * bare.kv_bytes_per_token
    gib = 1024**3
    print(
        f"\n--max-loras {slots} --max-lora-rank {rank}: KV cache {measured / gib:.4f} GiB smaller "
        f"(engine: {reports[None].tokens:,} -> {reports[(slots, rank)].tokens:,} tokens at "
        f"budgets {reports[None].requested_gib} / {reports[(slots, rank)].requested_gib} GiB); "
        f"plan: {predicted / gib:.4f} GiB ({measured / predicted - 1:+.2%})"
    )
    assert measured == pytest.approx(predicted, rel=0.05)
    assert predicted_kv == pytest.approx(predicted, rel=0.01)  # whole KV blocks of the plan
