"""The API server's value rules, checked when an LLMService is parsed. Table-driven."""

from __future__ import annotations

import pytest

from tokenfleet.api import kubevalues as kv


@pytest.mark.parametrize(
    ("key", "ok"),
    [
        ("team", True),
        ("example.com/team", True),
        ("app.kubernetes.io/part-of", True),
        ("a_b.c-d", True),
        ("team/", False),
        ("/team", False),
        ("-team", False),
        ("Example.com/team", False),  # the prefix is a lowercase DNS subdomain
        ("x" * 64, False),
        ("a b", False),
    ],
)
def test_label_keys(key: str, ok: bool) -> None:
    if ok:
        assert kv.check_label_key(key) == key
    else:
        with pytest.raises(ValueError, match="key"):
            kv.check_label_key(key)


@pytest.mark.parametrize(
    ("value", "ok"),
    [("", True), ("v1.2_x", True), ("a b", False), ("x" * 64, False), ("-a", False)],
)
def test_label_values(value: str, ok: bool) -> None:
    if ok:
        assert kv.check_label_value(value) == value
    else:
        with pytest.raises(ValueError, match="label value"):
            kv.check_label_value(value)


@pytest.mark.parametrize(
    ("value", "ok", "positive"),
    [
        (8, True, True),
        ("7500m", True, True),
        ("64Gi", True, True),
        ("1e3", True, True),
        ("0.5", True, True),
        ("0", True, False),
        (0, True, False),
        ("0Gi", True, False),
        (-1, False, False),
        ("lots", False, False),
        ("64 Gi", False, False),
        ("64gi", False, False),
        (True, False, False),
    ],
)
def test_quantities(value: object, ok: bool, positive: bool) -> None:
    if ok:
        assert kv.check_quantity(value) == value
    else:
        with pytest.raises(ValueError):
            kv.check_quantity(value)
    if positive:
        assert kv.check_positive_quantity(value) == value
    else:
        with pytest.raises(ValueError):
            kv.check_positive_quantity(value)


@pytest.mark.parametrize(
    ("affinity", "ok"),
    [
        (None, True),
        ({"nodeAffinity": {}}, True),
        ({"podAntiAffinity": {"x": 1}, "podAffinity": {}}, True),
        ({"nodeAfinity": {}}, False),
        ({"nodeAffinity": []}, False),
    ],
)
def test_affinity(affinity: dict | None, ok: bool) -> None:
    if ok:
        assert kv.check_affinity(affinity) == affinity
    else:
        with pytest.raises(ValueError):
            kv.check_affinity(affinity)


def test_annotations_over_the_size_limit() -> None:
    with pytest.raises(ValueError, match="bytes"):
        kv.check_annotations({"a": "x" * (256 * 1024)})
