"""Traces: the built-in shapes, seeding, and the Azure CSV with one clear error per bad row."""

from __future__ import annotations

import statistics
from pathlib import Path

import pytest

from tokenfleet.autoscale.fleetsim.observed import TTFT_BUCKETS, attainment, histogram_quantile
from tokenfleet.autoscale.fleetsim.traces import (
    BUILT_IN,
    arrival_cv,
    load,
    load_csv,
    synthetic,
)
from tokenfleet.errors import UserError


@pytest.mark.slow
@pytest.mark.parametrize("name", BUILT_IN)
def test_built_in_traces_are_seeded(name: str) -> None:
    assert synthetic(name, 3) == synthetic(name, 3)
    assert synthetic(name, 3) != synthetic(name, 4)


@pytest.mark.slow
def test_shapes() -> None:
    spike = synthetic("spike").rate_per_bucket(60)
    assert statistics.mean(spike[11:14]) > 3 * statistics.mean(spike[:9])
    diurnal = synthetic("diurnal").rate_per_bucket(60)
    assert len(diurnal) == 120  # a 2-hour day, peak at midday
    assert max(diurnal) > 4 * min(diurnal) and diurnal.index(max(diurnal)) in range(50, 70)
    gaps = [
        b.at - a.at
        for a, b in zip(
            synthetic("bursty").requests, synthetic("bursty").requests[1:], strict=False
        )
    ]
    poisson = [
        b.at - a.at
        for a, b in zip(
            synthetic("steady").requests, synthetic("steady").requests[1:], strict=False
        )
    ]
    cv = lambda xs: statistics.pstdev(xs) / statistics.mean(xs)  # noqa: E731
    assert cv(gaps) > 1.5 > 1.2 > cv(poisson) > 0.8  # gamma bursts vs Poisson
    assert synthetic("bursty").arrival_cv == 2.0 and synthetic("steady").arrival_cv == 1.0


@pytest.mark.slow
@pytest.mark.parametrize(("name", "low", "high"), [("bursty", 1.6, 2.4), ("diurnal", 0.9, 1.1)])
def test_arrival_cv_of_a_recorded_trace(name: str, low: float, high: float) -> None:
    # A CSV carries no CV: it is estimated per minute, so the diurnal ramp is not a burst.
    assert low < arrival_cv(synthetic(name).requests) < high


def test_arrival_cv_needs_enough_requests() -> None:
    assert arrival_cv(synthetic("steady").requests[:50]) == 1.0


def test_azure_csv(tmp_path: Path) -> None:
    path = tmp_path / "AzureLLMInferenceTrace_conv.csv"
    path.write_text(
        "TIMESTAMP,ContextTokens,GeneratedTokens\n"
        "2023-11-16 18:15:46.6805900,374,44\n"
        "2023-11-16 18:15:50.9951690,396,109\n"
        "2023-11-16 18:15:47.0000000,879,46\n"
    )
    trace = load(str(path))
    assert [(round(r.at, 3), r.prompt, r.output) for r in trace.requests] == [
        (0.0, 374, 44),
        (0.319, 879, 46),
        (4.315, 396, 109),
    ]
    assert trace.name == path.name and trace.duration == pytest.approx(5.315, abs=1e-3)


def test_csv_in_seconds(tmp_path: Path) -> None:
    path = tmp_path / "t.csv"
    path.write_text("TIMESTAMP,ContextTokens,GeneratedTokens\n10.5,100,10\n12,200,20\n")
    assert [r.at for r in load_csv(path).requests] == [0.0, 1.5]


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ("TIMESTAMP,Context,GeneratedTokens\n1,2,3\n", "no column(s) ContextTokens"),
        (
            "TIMESTAMP,ContextTokens,GeneratedTokens\n1,100,10\n2,abc,10\n",
            "line 3 ContextTokens=abc",
        ),
        ("TIMESTAMP,ContextTokens,GeneratedTokens\n1,100,0\n", "line 2 GeneratedTokens=0"),
        (
            "TIMESTAMP,ContextTokens,GeneratedTokens\nyesterday,100,10\n",
            "line 2 TIMESTAMP=yesterday",
        ),
        ("TIMESTAMP,ContextTokens,GeneratedTokens\n", "has no requests"),
    ],
)
def test_bad_csv_rows_name_the_line_and_column(tmp_path: Path, body: str, message: str) -> None:
    path = tmp_path / "bad.csv"
    path.write_text(body)
    with pytest.raises(UserError, match=message.replace("(", r"\(").replace(")", r"\)")):
        load_csv(path, strict=True)


def test_unreadable_rows_are_dropped_and_counted(tmp_path: Path) -> None:
    path = tmp_path / "outliers.csv"
    path.write_text(
        "TIMESTAMP,ContextTokens,GeneratedTokens\n"
        "1,100,10\n2,abc,10\n3,100,0\nyesterday,5,5\n4,200,20\n5,300,-1\n\n6,nan,3\n"
    )
    trace = load_csv(path)
    assert [(r.prompt, r.output) for r in trace.requests] == [(100, 10), (200, 20)]
    assert trace.dropped.counts == {
        "ContextTokens is not a positive token count": 2,
        "GeneratedTokens is not a positive token count": 2,
        "TIMESTAMP is neither seconds nor a date-time": 1,
    }
    assert trace.dropped.first["ContextTokens is not a positive token count"] == "line 3"


def test_jsonl_trace(tmp_path: Path) -> None:
    """Mooncake-style JSONL: timestamp in ms, extra keys ignored, bad lines counted."""
    path = tmp_path / "mooncake.jsonl"
    path.write_text(
        '{"timestamp": 1000, "input_length": 7000, "output_length": 300, "hash_ids": [1, 2]}\n'
        '{"timestamp": 250, "input_length": 50, "output_length": 5}\n'
        "not json\n"
        '{"timestamp": 3000, "input_length": 10}\n'
        '["a list"]\n'
    )
    trace = load(str(path))
    assert [(r.at, r.prompt, r.output) for r in trace.requests] == [
        (0.0, 50, 5),
        (0.75, 7000, 300),
    ]
    assert trace.dropped.total == 3
    with pytest.raises(UserError, match="line 3 line=not json: is not a JSON object"):
        load(str(path), strict=True)
    with pytest.raises(UserError, match="line 1 output_length=missing: is missing"):
        (tmp_path / "b.jsonl").write_text('{"timestamp": 3000, "input_length": 10}\n')
        load(str(tmp_path / "b.jsonl"), strict=True)


def test_plain_csv_trace(tmp_path: Path) -> None:
    path = tmp_path / "plain.csv"
    path.write_text("timestamp_s,input_tokens,output_tokens\n0.5,100,10\n2.0,4000,200\n")
    assert [(r.at, r.prompt, r.output) for r in load_csv(path).requests] == [
        (0.0, 100, 10),
        (1.5, 4000, 200),
    ]


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"\xff\xfe\x00garbage", "cannot be read as UTF-8 text"),
        (b"", "has no column(s)"),
        (b"a,b,c\n1,2,3\n", "has no column(s) TIMESTAMP"),
        (b'{"timestamp": 1}\n', "has no requests (1 unreadable"),
    ],
)
def test_unusable_files_are_one_clear_error(tmp_path: Path, data: bytes, message: str) -> None:
    path = tmp_path / "trace.csv"
    path.write_bytes(data)
    with pytest.raises(UserError, match=message.replace("(", r"\(").replace(")", r"\)")):
        load_csv(path)


def test_unknown_trace_name() -> None:
    with pytest.raises(UserError, match="is not a file"):
        load("no-such-trace")


def test_prometheus_arithmetic() -> None:
    """histogram_quantile interpolates inside the bucket; attainment rounds the SLO down to a
    bucket bound (0.6 s -> 0.5 s)."""
    values = [0.05] * 50 + [0.3] * 50  # half in (0.04, 0.06], half in (0.25, 0.5]
    assert histogram_quantile(0.5, values, TTFT_BUCKETS) == pytest.approx(0.06)
    assert histogram_quantile(0.75, values, TTFT_BUCKETS) == pytest.approx(0.375)
    assert histogram_quantile(0.5, [], TTFT_BUCKETS) is None
    assert attainment([0.4, 0.55, 0.7], 0.6, TTFT_BUCKETS) == pytest.approx(1 / 3)
    assert attainment([], 0.5, TTFT_BUCKETS) is None
