"""SGLang at low load: a request pays the client's time outside the engine, not the 90 ms
its H100 rows (all at concurrency 16 or more) absorbed when fitted alone.

The per-request time is identified by rows near an idle server; SGLang's calibration rows
have none, so calibration/silicon_fit.py gives SGLang vLLM's fit (the same client against the
same kind of front end: tokenise, hand off, stream back)."""

from __future__ import annotations

import pytest

from tokenfleet.calibration.silicon import parse
from tokenfleet.calibration.silicon_fit import LOW_CONCURRENCY, fit
from tokenfleet.capacity import PlanRequest, get_gpu, load_model, plan
from tokenfleet.capacity.overheads import OVERHEADS

HEADER = (
    "id,backend,backend_version,model_path,system,precision,gemm_quant_mode,moe_quant_mode,isl,"
    "osl,batch_size,tp_size,pp_size,attention_dp_size,moe_tp_size,moe_ep_size,"
    "silicon_ttft_ms,silicon_tpot_ms"
)


def _ttft_ms(engine: str) -> float:
    p = plan(
        PlanRequest(
            arch=load_model("Qwen/Qwen3-8B"),
            gpu=get_gpu("h100-sxm"),
            engine=engine,  # type: ignore[arg-type]
            tensor_parallel_size=1,
            concurrency=1,
            input_tokens=128,
            output_tokens=128,
        )
    )
    return p.predicted.ttft_ms


def test_a_short_prompt_at_concurrency_one_costs_what_vllms_does() -> None:
    sglang, vllm = _ttft_ms("sglang"), _ttft_ms("vllm")
    # The same client path and the same prefill step (a few ms apart at most).
    assert sglang == pytest.approx(vllm, abs=5.0)
    assert sglang < 40.0


def test_the_sglang_entry_is_vllms_fit() -> None:
    s, v = OVERHEADS["sglang"], OVERHEADS["vllm"]
    assert (s.fixed_s, s.per_prompt_token_s) == (v.fixed_s, v.per_prompt_token_s)


def test_rows_without_low_concurrency_take_vllms_fit() -> None:
    # ids chosen to hash into the fit split (silicon_fit.part)
    rows = [
        "fit-3,vllm,0.10.2,Qwen/Qwen3-32B,h100_sxm,,,,1024,128,1,2,1,,1,1,95.0,16.0",
        "fit-1,vllm,0.10.2,Qwen/Qwen3-32B,h100_sxm,,,,1024,128,4,2,1,,1,1,140.0,17.0",
        "fit-2,sglang,0.5.1,Qwen/Qwen3-32B,h100_sxm,,,,1024,128,16,2,1,,1,1,840.8,16.5",
    ]
    parsed = parse("\n".join([HEADER, *rows]) + "\n")
    assert min(r.concurrency for r in parsed if r.engine == "sglang") > LOW_CONCURRENCY
    table = fit(parsed)
    assert table["sglang"].fixed_s == table["vllm"].fixed_s
    assert table["sglang"].per_prompt_token_s == table["vllm"].per_prompt_token_s
