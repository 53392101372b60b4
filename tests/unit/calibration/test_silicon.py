"""calibration/silicon.py + silicon_bench.py: measured rows in AIConfigurator's format, scored.

The parser names the line and column of a bad value; rows the planner cannot plan say why;
a planned row is predicted the way the benchmark ran (all clients start at once).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tokenfleet.calibration.silicon import Refused, Scored, errors, parse, resolve
from tokenfleet.calibration.silicon_bench import predict_row
from tokenfleet.cli import main
from tokenfleet.errors import UserError

HEADER = (
    "id,backend,backend_version,model_path,system,precision,gemm_quant_mode,moe_quant_mode,isl,"
    "osl,batch_size,tp_size,pp_size,attention_dp_size,moe_tp_size,moe_ep_size,"
    "silicon_ttft_ms,silicon_tpot_ms"
)
QWEN_H100 = "a,sglang,0.5.1,Qwen/Qwen3-32B,h100_sxm,,,,1024,128,16,2,1,,1,1,840.8,16.5"


def _csv(*rows: str) -> str:
    return "\n".join(["# comment lines are skipped", HEADER, *rows]) + "\n"


def test_parse_reads_rows_and_numbers() -> None:
    (row,) = parse(_csv(QWEN_H100))
    assert (row.line, row.engine, row.isl, row.osl, row.concurrency, row.tp) == (
        3,
        "sglang",
        1024,
        128,
        16,
        2,
    )
    assert row.attention_dp == 1 and row.ttft_ms == pytest.approx(840.8)


@pytest.mark.parametrize(
    ("bad", "field"),
    [
        (QWEN_H100.replace(",1024,", ",1k,"), "line 3: isl"),
        (QWEN_H100.replace(",840.8,", ",-1,"), "line 3: silicon_ttft_ms"),
        (QWEN_H100.replace(",16.5", ",nan"), "line 3: silicon_tpot_ms"),
    ],
)
def test_a_bad_value_names_its_line_and_column(bad: str, field: str) -> None:
    with pytest.raises(UserError) as e:
        parse(_csv(bad))
    assert e.value.field == field


def test_a_file_without_the_columns_is_refused() -> None:
    with pytest.raises(UserError, match="header lacks"):
        parse("a,b\n1,2\n")


@pytest.mark.parametrize(
    ("change", "why"),
    [
        ((",h100_sxm,", ",b300_sxm,"), "GPU b300_sxm is not in the GPU catalog"),
        (("Qwen/Qwen3-32B", "zhipuai/GLM-5"), "model zhipuai/GLM-5 is not in the catalog"),
        ((",,,,1024", ",fp4,nvfp4,nvfp4,1024"), "weight format nvfp4 is not modelled"),
        ((",2,1,,1,1,", ",2,1,4,1,1,"), "attention data parallelism"),
        ((",16,2,1,,1,1,", ",16,1,1,,4,1,"), "attention data parallelism"),
        ((",sglang,", ",trtllm,"), "engine 'trtllm' is not modelled"),
    ],
)
def test_rows_the_planner_cannot_plan_say_why(change: tuple[str, str], why: str) -> None:
    (row,) = parse(_csv(QWEN_H100.replace(*change)))
    reason = resolve(row)
    assert isinstance(reason, str) and why in reason


def test_aliases_map_checkpoints_onto_the_catalog() -> None:
    r1 = QWEN_H100.replace("Qwen/Qwen3-32B", "deepseek-ai/DeepSeek-R1").replace(
        ",,,,", ",fp8,fp8,fp8,"
    )
    (row,) = parse(_csv(r1.replace(",2,1,,1,1,", ",8,1,,1,8,")))
    r = resolve(row)
    assert not isinstance(r, str)
    assert (r.arch.name, r.quantization, r.expert_parallel) == (
        "deepseek-ai/DeepSeek-V3",
        "fp8",
        True,
    )
    oss = QWEN_H100.replace("Qwen/Qwen3-32B", "openai/gpt-oss-120b").replace(
        ",,,,", ",fp4,nvfp4,nvfp4,"
    )
    (row,) = parse(_csv(oss))
    r = resolve(row)
    assert not isinstance(r, str) and r.quantization is None  # its own MXFP4 checkpoint


def test_a_planned_row_is_scored_against_its_measurement() -> None:
    (row,) = parse(_csv(QWEN_H100))
    out = predict_row(row)
    assert isinstance(out, Scored)
    assert out.plan.tensor_parallel_size == 2 and out.plan.engine == "sglang"
    assert out.ttft_ms > 0 and out.tpot_ms > 0
    assert out.ttft_error == pytest.approx(out.ttft_ms / 840.8 - 1)


def test_a_configuration_that_does_not_fit_is_refused_with_the_planners_reason() -> None:
    (row,) = parse(_csv(QWEN_H100.replace("Qwen/Qwen3-32B", "meta-llama/Llama-3.1-405B")
                        .replace(",2,1,,1,1,", ",1,1,,1,1,")))  # fmt: skip
    out = predict_row(row)
    assert isinstance(out, Refused) and "does not fit" in out.reason


def test_errors_summarise_absolute_error_and_signed_bias() -> None:
    e = errors([0.1, -0.2, 0.3, -0.4, 0.5])
    assert e is not None
    assert (e.n, e.median, e.p90, e.bias) == (5, pytest.approx(0.3), 0.5, pytest.approx(0.1))
    assert errors([]) is None


def test_cli_scores_a_file_and_refuses_a_missing_one(tmp_path: Path, capsys) -> None:
    f = tmp_path / "rows.csv"
    f.write_text(_csv(QWEN_H100, QWEN_H100.replace(",h100_sxm,", ",gb200,")))
    assert main(["calibrate", "--perf", "--silicon", str(f)]) == 0
    out = capsys.readouterr().out
    assert "h100_sxm sglang Qwen/Qwen3-32B" in out
    assert "1 rows scored, 1 not planned" in out and "GPU gb200 is not in the GPU catalog" in out
    assert main(["calibrate", "--perf", "--silicon", str(tmp_path / "none.csv")]) == 2
    assert "cannot be read" in capsys.readouterr().err
    assert main(["calibrate", "--silicon", str(f)]) == 2
