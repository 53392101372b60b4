"""SGLang on 141-192 GB GPUs: configurations its default mem_fraction_static cannot hold.

AIConfigurator measured DeepSeek-R1 FP8 at TP 4 on B200 with SGLang 0.5.9 (the same
architecture as DeepSeek-V3): it must plan. SGLang's default reserve (26 GB at a 16K chunk)
leaves 152 GiB for 157 GiB of weights; the planner raises the fraction and says so.
"""

from __future__ import annotations

import pytest

from tokenfleet.capacity import get_gpu, load_model, plan
from tokenfleet.capacity.engine_profiles import sglang_default_mem_fraction
from tokenfleet.capacity.errors import PlanError
from tokenfleet.capacity.types import PlanRequest

DSV3 = "deepseek-ai/DeepSeek-V3"


def _req(model: str, gpu: str, tp: int, **kw: object) -> PlanRequest:
    return PlanRequest(
        arch=load_model(model),
        gpu=get_gpu(gpu),
        engine="sglang",
        engine_version="0.5.9",
        tensor_parallel_size=tp,
        input_tokens=8192,
        output_tokens=1024,
        concurrency=8,
        **kw,  # type: ignore[arg-type]
    )


def test_deepseek_fp8_at_tp4_on_b200_plans_with_a_raised_fraction() -> None:
    p = plan(_req(DSV3, "b200", 4, quantization="fp8"))
    default = sglang_default_mem_fraction(get_gpu("b200"), 16384, 4, 1)
    assert default < 0.86
    assert p.memory_fraction > default
    assert p.kv_cache_tokens >= 8192 + 1024
    assert any("raised to" in w and "mem-fraction-static" in w for w in p.warnings)


def test_a_fraction_the_user_set_is_kept_and_then_does_not_fit() -> None:
    with pytest.raises(PlanError, match="does not fit"):
        plan(_req(DSV3, "b200", 4, quantization="fp8", memory_fraction=0.85))


@pytest.mark.parametrize(
    ("model", "gpu", "tp"),
    [("meta-llama/Llama-3.1-70B", "h200", 2), ("meta-llama/Llama-3.1-8B", "b200", 1)],
)
def test_a_model_that_fits_keeps_sglangs_default(model: str, gpu: str, tp: int) -> None:
    p = plan(_req(model, gpu, tp))
    chunk = 16384 if gpu == "b200" else 8192
    assert p.memory_fraction == sglang_default_mem_fraction(get_gpu(gpu), chunk, tp, 1)
    assert not any("raised to" in w for w in p.warnings)
