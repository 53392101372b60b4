"""The textbook formula reproduces the source's Llama 3.1 405B table, including its slip."""

import pytest

from tokenfleet.calibration.textbook import textbook
from tokenfleet.capacity import load_model

GIB = 1024**3


@pytest.fixture(scope="module")
def table():
    t = textbook(load_model("meta-llama/Llama-3.1-405B"), 4, 4096, 4096, 131072)
    return t, {r.part: r.bytes for r in t.rows}


@pytest.mark.parametrize(
    "part,expected_bytes",
    [
        ("KV cache, request", 16_911_433_728),  # 15.75 GiB
        ("KV cache, context", 270_582_939_648),  # 252 GiB
        ("attention activations", 5_368_709_120),  # 5.0 GiB, not the text's 10 GB
        ("FFN activations", 9_126_805_504),  # 8.5 GiB
        ("input + output data", 1_048_576),  # 1 MiB
    ],
)
def test_rows_match_the_formula(table, part, expected_bytes):
    assert table[1][part] == expected_bytes


def test_parameters_are_counted_from_the_config_near_the_stated_810_gb(table):
    assert table[1]["parameters"] == pytest.approx(810e9, rel=0.005)


def test_totals_span_the_stated_range(table):
    t, _ = table
    assert 0.84e12 < t.total_bytes < 0.87e12  # "about 863 GB"
    assert t.total_with_context_bytes == pytest.approx(1.1e12, rel=0.01)  # "to 1.1 TB"


def test_the_attention_slip_is_called_out(table):
    t, _ = table
    assert any("10 GB" in note and "5.0 GiB" in note for note in t.notes)
