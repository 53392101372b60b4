"""Synthetic datasets: sizes, determinism, shapes and input errors."""

from __future__ import annotations

import pytest

from tokenfleet.bench.dataset import (
    SHAPES,
    WORDS,
    DatasetSpec,
    dataset_spec,
    estimate_tokens,
    length_bounds,
)
from tokenfleet.sim.tokens import count_prompt_tokens


@pytest.mark.parametrize(
    ("length", "ratio", "expected"),
    [
        (100, 0.0, (100, 100)),
        (100, 0.1, (90, 110)),
        (1, 0.5, (1, 2)),
        (7, 0.25, (5, 9)),
        (1, 0.0, (1, 1)),
    ],
)
def test_length_bounds(length: int, ratio: float, expected: tuple[int, int]) -> None:
    assert length_bounds(length, ratio) == expected


@pytest.mark.parametrize(
    ("name", "input_len", "output_len", "expected"),
    [
        ("random", None, None, (1024, 128)),
        ("random", 10, 5, (10, 5)),
        ("synthetic-chat", None, None, (2048, 300)),
        ("prefill-heavy", None, None, (8192, 64)),
        ("decode-heavy", None, None, (128, 1024)),
        ("decode-heavy", None, 16, (128, 16)),
    ],
)
def test_dataset_spec_sizes(
    name: str, input_len: int | None, output_len: int | None, expected: tuple[int, int]
) -> None:
    spec = dataset_spec(name, input_len, output_len, 0.0, 0)
    assert (spec.input_len, spec.output_len) == expected


@pytest.mark.parametrize(
    ("kwargs", "fragment"),
    [
        ({"name": "sharegpt"}, "--dataset-name 'sharegpt'"),
        ({"input_len": 0}, "--random-input-len 0"),
        ({"output_len": -1}, "--random-output-len -1"),
        ({"ratio": 1.0}, "--random-range-ratio 1.0"),
        ({"ratio": -0.1}, "--random-range-ratio -0.1"),
    ],
)
def test_dataset_spec_errors_name_the_flag(kwargs: dict[str, object], fragment: str) -> None:
    args: dict[str, object] = {"name": "random", "input_len": 8, "output_len": 8, "ratio": 0.0}
    args.update(kwargs)
    with pytest.raises(ValueError, match=fragment.replace("(", r"\(").replace(")", r"\)")):
        dataset_spec(
            str(args["name"]),
            args["input_len"],  # type: ignore[arg-type]
            args["output_len"],  # type: ignore[arg-type]
            float(args["ratio"]),  # type: ignore[arg-type]
            0,
        )


@pytest.mark.parametrize("ratio", [0.0, 0.3])
def test_requests_have_the_sizes_they_claim(ratio: float) -> None:
    spec = DatasetSpec(input_len=200, output_len=50, range_ratio=ratio, seed=3)
    low_in, high_in = length_bounds(200, ratio)
    low_out, high_out = length_bounds(50, ratio)
    for i in range(50):
        r = spec.request(i)
        assert low_in <= r.prompt_len <= high_in
        assert low_out <= r.expected_output_len <= high_out
        assert estimate_tokens(r.prompt) == r.prompt_len
        # The simulator's tokenizer agrees, so its prompt_tokens_total matches exactly.
        assert count_prompt_tokens(r.prompt) == r.prompt_len


def test_requests_are_deterministic_per_seed_and_distinct_per_index() -> None:
    a = DatasetSpec(64, 8, 0.0, seed=1)
    b = DatasetSpec(64, 8, 0.0, seed=1)
    c = DatasetSpec(64, 8, 0.0, seed=2)
    assert a.request(5) == b.request(5)
    assert a.request(5) != c.request(5)
    # Different first words: no shared prefix for an engine's prefix cache to exploit.
    firsts = {a.request(i).prompt.split()[:4].__repr__() for i in range(20)}
    assert len(firsts) == 20


def test_shapes_match_the_source_material() -> None:
    assert SHAPES["synthetic-chat"] == (2048, 300)
    assert all(len(w) <= 4 for w in WORDS)
