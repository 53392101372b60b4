"""calibration/silicon_harness.py: the silicon rows predicted under the launch and client they ran.

SGLang rows of releases whose AIConfigurator launch template carries --enable-mixed-chunk run
the mixed schedule with the generator's prefill budget; a benchmark that repeats its prompts
gets prefix-cache hits on them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tokenfleet.calibration.silicon import Scored, parse
from tokenfleet.calibration.silicon_bench import predict_row
from tokenfleet.calibration.silicon_harness import DEFAULT, Harness, release
from tokenfleet.capacity.load import Replica
from tokenfleet.cli import main

HEADER = (
    "id,backend,backend_version,model_path,system,precision,gemm_quant_mode,moe_quant_mode,isl,"
    "osl,batch_size,tp_size,pp_size,attention_dp_size,moe_tp_size,moe_ep_size,"
    "silicon_ttft_ms,silicon_tpot_ms"
)
SGLANG_ROW = "a,sglang,{v},Qwen/Qwen3-32B,h100_sxm,,,,1024,128,64,2,1,,1,1,2530.1,30.1"
VLLM_ROW = "b,vllm,0.12.0,Qwen/Qwen3-32B,h100_sxm,,,,4096,512,64,4,1,,1,1,1000,20"


def _row(line: str):  # type: ignore[no-untyped-def]
    (row,) = parse("\n".join([HEADER, line]) + "\n")
    return row


def _scored(line: str, harness: Harness = DEFAULT) -> Scored:
    out = predict_row(_row(line), harness)
    assert isinstance(out, Scored)
    return out


@pytest.mark.parametrize(
    ("version", "parsed"),
    [
        ("0.5.6.post2", (0, 5, 6, 2)),
        ("0.5.9", (0, 5, 9, 0)),
        ("v0.5.1.post1", (0, 5, 1, 1)),
        ("0.12", (0, 12, 0, 0)),
        ("", None),
        ("nightly", None),
    ],
)
def test_release_reads_post_releases(version: str, parsed: object) -> None:
    assert release(version) == parsed


@pytest.mark.parametrize(
    ("launch", "version", "mixed"),
    [
        # the templates of these releases predate the flag (2026-01-19)
        ("auto", "0.5.1.post1", False),
        ("auto", "0.5.4.post3", False),
        ("auto", "0.5.6", False),  # launched with the 0.5.4.post3 template
        # added after it, with the flag from their first version
        ("auto", "0.5.6.post2", True),
        ("auto", "0.5.8.post1", True),
        ("auto", "0.5.9", True),
        ("auto", "", False),  # unknown version: SGLang's own defaults
        ("defaults", "0.5.9", False),
        ("generator", "0.5.1.post1", True),
    ],
)
def test_the_sglang_launch_follows_the_generators_templates(
    launch: str, version: str, mixed: bool
) -> None:
    assert Harness(launch).sglang_generator_flags(version) is mixed  # type: ignore[arg-type]


def test_the_generator_launch_mixes_prefill_into_decode_under_its_prefill_budget() -> None:
    sglang = Replica.of("sglang", 500_000, 1024, 8192, 32_768)
    launched = Harness("generator").launch("sglang", "0.5.1.post1", 1024, sglang)
    assert launched.mixed_prefill and launched.max_num_batched_tokens == 1024 + 1500
    long_prompt = Harness("generator").launch("sglang", "0.5.9", 8000, sglang)
    assert long_prompt.max_num_batched_tokens == 8192  # chunked_prefill_size still bounds it
    assert DEFAULT.launch("sglang", "0.5.1.post1", 1024, sglang) == sglang
    vllm = Replica.of("vllm", 500_000, 1024, 8192, 32_768)
    assert Harness("generator").launch("vllm", "0.12.0", 1024, vllm) == vllm


def test_an_sglang_launch_pages_its_kv_by_the_page_its_backend_forces() -> None:
    sglang = Replica.of("sglang", 500_000, 1024, 16384, 32_768)
    for harness in (DEFAULT, Harness("defaults"), Harness("generator")):
        assert harness.launch("sglang", "0.5.9", 1024, sglang, 64).block_size == 64
        assert harness.launch("sglang", "0.5.9", 1024, sglang).block_size == 1
    vllm = Replica.of("vllm", 500_000, 1024, 8192, 32_768)
    assert DEFAULT.launch("vllm", "0.12.0", 1024, vllm, 64) == vllm


@dataclass(frozen=True)
class _Spy(Harness):
    pages: list[int] = field(default_factory=list)

    def launch(
        self, engine: str, version: str, isl: int, replica: Replica, page_size: int = 1
    ) -> Replica:
        self.pages.append(page_size)
        return super().launch(engine, version, isl, replica, page_size)


@pytest.mark.parametrize(
    ("gpu", "model", "page"),
    [
        ("b200_sxm", "meta-llama/Llama-3.1-70B", 64),  # trtllm_mha
        ("b200_sxm", "deepseek-ai/DeepSeek-R1", 64),  # trtllm_mla
        ("h200_sxm", "meta-llama/Llama-3.1-70B", 1),  # fa3
        ("h100_sxm", "Qwen/Qwen3-32B", 1),
    ],
)
def test_the_bench_launches_each_row_with_its_gpus_default_page(
    gpu: str, model: str, page: int
) -> None:
    spy = _Spy()
    row = f"c,sglang,0.5.9,{model},{gpu},fp8,fp8,fp8,1024,128,4,8,1,1,8,1,300,10"
    _scored(row, spy)
    assert spy.pages and set(spy.pages) == {page}


def test_mixed_chunking_spreads_the_waves_so_the_mean_ttft_falls_and_tpot_rises() -> None:
    # Without it SGLang's prefill batches keep every round a burst: the decodes wait for
    # each prefill batch (higher TTFT mean, lower TPOT); with it the prefills join the
    # decode steps.
    apart = _scored(SGLANG_ROW.format(v="0.5.1.post1"))
    mixed = _scored(SGLANG_ROW.format(v="0.5.1.post1"), Harness("generator"))
    assert mixed.ttft_ms < apart.ttft_ms
    assert mixed.tpot_ms > apart.tpot_ms


def test_repeated_prompts_are_seen_more_often_the_more_requests_are_sent() -> None:
    aiperf = Harness(dataset_entries=100)
    assert DEFAULT.seen_share(64) == 0.0
    shares = [aiperf.seen_share(c) for c in (1, 4, 16, 64, 256)]
    assert shares == sorted(shares) and shares[0] > 0.0 and shares[-1] <= 1.0
    # the closed form is the mean over the measured requests of 1 - (1 - 1/100)^n
    c = 4
    n = range(2 * c, 22 * c)
    assert aiperf.seen_share(c) == pytest.approx(sum(1 - 0.99**k for k in n) / len(n))
    assert aiperf.seen_share(c, first=c) > aiperf.seen_share(c, first=0, count=c)


def test_the_prefix_cache_keeps_only_what_the_kv_pool_has_room_for() -> None:
    aiperf = Harness(dataset_entries=100)
    assert aiperf.kept_share(10_000_000, 64, 1000, 1000) == 1.0
    assert aiperf.kept_share(64 * 2000 + 50 * 1000, 64, 1000, 1000) == pytest.approx(0.5)
    assert aiperf.kept_share(64 * 2000, 64, 1000, 1000) == 0.0
    assert aiperf.hit_rate(64, 64 * 2000, 64, 1000, 1000) == 0.0


def test_prefix_cache_hits_shorten_the_predicted_ttft() -> None:
    distinct = _scored(VLLM_ROW)
    repeated = _scored(VLLM_ROW, Harness(dataset_entries=100))
    assert repeated.ttft_ms < 0.5 * distinct.ttft_ms


def test_cli_takes_the_harness_and_refuses_a_negative_prompt_count(tmp_path: Path, capsys) -> None:
    f = tmp_path / "rows.csv"
    f.write_text("\n".join([HEADER, SGLANG_ROW.format(v="0.5.9")]) + "\n")
    base = ["calibrate", "--perf", "--silicon", str(f), "--rows"]
    assert main([*base, "--sglang-launch", "defaults"]) == 0
    apart = capsys.readouterr().out
    assert main([*base, "--sglang-launch", "generator", "--dataset-entries", "100"]) == 0
    assert capsys.readouterr().out != apart
    assert main([*base, "--dataset-entries", "-1"]) == 2
    err = capsys.readouterr().err
    assert "dataset-entries" in err and "-1" in err and "Traceback" not in err
