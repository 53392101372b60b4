"""Metric aggregation: vLLM's definitions on hand-computed tables."""

from __future__ import annotations

import pytest

from tokenfleet.bench.aggregate import (
    RequestOutput,
    aggregate,
    distribution,
    is_good,
    parse_goodput,
    parse_metric_names,
    parse_percentiles,
    peak_concurrency,
    percentile,
)


@pytest.mark.parametrize(
    ("values", "p", "expected"),
    [
        ([], 50, 0.0),
        ([3.0], 99, 3.0),
        ([1.0, 2.0, 3.0, 4.0], 50, 2.5),  # numpy: linear between order statistics
        ([1.0, 2.0, 3.0, 4.0], 0, 1.0),
        ([1.0, 2.0, 3.0, 4.0], 100, 4.0),
        ([1.0, 2.0, 3.0, 4.0, 5.0], 90, 4.6),
        ([float(i) for i in range(1, 101)], 99, 99.01),
    ],
)
def test_percentile_matches_numpy_linear(values: list[float], p: float, expected: float) -> None:
    assert percentile(values, p) == pytest.approx(expected)


def test_distribution_in_ms_with_population_std() -> None:
    d = distribution([0.1, 0.2, 0.3, 0.4], (50.0, 99.0))
    assert d.mean == pytest.approx(250.0)
    assert d.median == pytest.approx(250.0)
    assert d.std == pytest.approx(111.8033988)  # numpy.std, ddof=0
    assert [p for p, _ in d.percentiles] == [50.0, 99.0]
    assert [v for _, v in d.percentiles] == pytest.approx([250.0, 397.0])


def _out(ttft: float, itl: list[float], tokens: int, start: float = 0.0, **kw: object):
    return RequestOutput(
        prompt_len=int(kw.get("prompt_len", 10)),  # type: ignore[call-overload]
        success=bool(kw.get("success", True)),
        output_tokens=tokens,
        ttft=ttft,
        itl=itl,
        latency=ttft + sum(itl),
        start_time=start,
    )


def test_aggregate_counts_and_throughputs() -> None:
    outputs = [
        _out(0.1, [0.05, 0.05, 0.05], 4, start=0.0),
        _out(0.3, [0.1], 2, start=0.5),
        RequestOutput(prompt_len=7, success=False, error="boom"),
    ]
    m = aggregate(outputs, duration=2.0, percentiles=(99.0,))
    assert (m.completed, m.failed) == (2, 1)
    assert (m.total_input, m.total_output) == (20, 6)
    assert m.output_lens == (4, 2, 0)
    assert m.request_throughput == pytest.approx(1.0)
    assert m.output_throughput == pytest.approx(3.0)
    assert m.total_token_throughput == pytest.approx(13.0)
    assert m.distributions["ttft"].mean == pytest.approx(200.0)
    # TPOT = (e2e - ttft) / (tokens - 1): 0.15/3 = 50 ms and 0.1/1 = 100 ms
    assert m.distributions["tpot"].mean == pytest.approx(75.0)
    assert m.distributions["itl"].mean == pytest.approx(62.5)
    assert m.distributions["e2el"].mean == pytest.approx((250.0 + 400.0) / 2)
    assert m.max_concurrent_requests == 1  # 0-0.25 and 0.5-0.9 do not overlap
    assert m.request_goodput == 0.0  # no SLO given


@pytest.mark.parametrize(
    ("slo", "good"),
    [
        ({"ttft": 200}, 1),  # 100 ms passes, 300 ms fails
        ({"ttft": 300}, 2),  # the boundary counts as met, as in vLLM (<=)
        ({"tpot": 60}, 1),  # 50 ms passes, 100 ms fails
        ({"ttft": 500, "tpot": 60}, 1),
        ({"e2el": 250}, 1),
        ({"ttft": 50}, 0),
    ],
)
def test_goodput_counts_requests_meeting_every_slo(slo: dict[str, float], good: int) -> None:
    outputs = [_out(0.1, [0.05, 0.05, 0.05], 4), _out(0.3, [0.1], 2)]
    m = aggregate(outputs, duration=2.0, goodput_slo_ms=slo)
    assert m.request_goodput == pytest.approx(good / 2.0)


def test_single_token_request_has_no_tpot_and_passes_tpot_slo() -> None:
    one = _out(0.05, [], 1)
    m = aggregate([one], duration=1.0, goodput_slo_ms={"tpot": 1})
    assert m.distributions["tpot"].mean == 0.0
    assert is_good(one, 1, {"tpot": 1})
    assert m.request_goodput == 1.0


@pytest.mark.parametrize(
    ("intervals", "peak"),
    [
        ([], 0),
        ([(0, 1)], 1),
        ([(0, 1), (1, 2)], 1),  # back to back is not overlap
        ([(0, 2), (1, 3), (1.5, 1.6)], 3),
        ([(0, 10)] + [(i, i + 0.5) for i in range(5)], 2),
    ],
)
def test_peak_concurrency(intervals: list[tuple[float, float]], peak: int) -> None:
    assert peak_concurrency(intervals) == peak


def test_all_failed_gives_zeros_not_errors() -> None:
    m = aggregate([RequestOutput(prompt_len=5, error="x")], duration=1.0)
    assert (m.completed, m.failed, m.total_input) == (0, 1, 0)
    assert m.distributions["ttft"].mean == 0.0
    assert m.max_output_tokens_per_s == 0.0


@pytest.mark.parametrize(
    ("pairs", "expected"),
    [
        (None, {}),
        (["ttft:500"], {"ttft": 500.0}),
        (["ttft:500", "tpot:50", "e2el:20000"], {"ttft": 500.0, "tpot": 50.0, "e2el": 20000.0}),
    ],
)
def test_parse_goodput(pairs: list[str] | None, expected: dict[str, float]) -> None:
    assert parse_goodput(pairs) == expected


@pytest.mark.parametrize(
    ("pairs", "fragment"),
    [
        (["ttft500"], "expected NAME:MS"),
        (["itl:5"], "unknown SLO 'itl'"),
        (["ttft:fast"], "not a number"),
        (["ttft:-1"], ">= 0"),
    ],
)
def test_parse_goodput_errors(pairs: list[str], fragment: str) -> None:
    with pytest.raises(ValueError, match=fragment):
        parse_goodput(pairs)


def test_parse_metric_names_and_percentiles() -> None:
    assert parse_metric_names("ttft, itl") == ("ttft", "itl")
    assert parse_percentiles("50,90,99.9") == (50.0, 90.0, 99.9)
    with pytest.raises(ValueError, match="unknown metric 'latency'"):
        parse_metric_names("ttft,latency")
    with pytest.raises(ValueError, match="outside 0-100"):
        parse_percentiles("50,101")
    with pytest.raises(ValueError, match="not a number"):
        parse_percentiles("p99")
