"""Pure rules of the reconciler: redaction of literal env values, backoff per error."""

from __future__ import annotations

import pytest

from tokenfleet.controller.kube import ApiError
from tokenfleet.controller.reconcile import CONFLICT_DELAY, RETRY_DELAYS, redact, retry_delay


def body(*values: str | None) -> dict:
    env = [{"name": f"V{i}", "value": v} for i, v in enumerate(values)]
    env.append({"name": "REF", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}})
    return {"spec": {"engine": {"env": env}}}


@pytest.mark.parametrize(
    ("text", "values", "expected"),
    [
        ('value: "hunter22" refused', ("hunter22",), 'value: "***" refused'),
        ("a=secret-long b=secret", ("secret", "secret-long"), "a=*** b=***"),  # longest first
        ("replicas: 1 on", ("1", "on"), "replicas: 1 on"),  # too short to be a secret
        ("nothing here", (None,), "nothing here"),
    ],
)
def test_literal_env_values_are_redacted(text: str, values: tuple, expected: str) -> None:
    assert redact(text, body(*values)) == expected


def test_redact_without_a_body_or_env_is_the_identity() -> None:
    assert redact("x", None) == "x" and redact("x", {"spec": {}}) == "x"


@pytest.mark.parametrize(
    ("status", "failures", "delay"),
    [
        (409, 1, CONFLICT_DELAY),
        (409, 50, CONFLICT_DELAY),  # a conflict never waits long
        (500, 1, RETRY_DELAYS[0]),
        (503, 3, RETRY_DELAYS[2]),
        (429, 100, RETRY_DELAYS[-1]),  # capped
    ],
)
def test_backoff_is_per_error_and_capped(status: int, failures: int, delay: float) -> None:
    assert retry_delay(ApiError(status, "x", "y", "z"), failures) == delay
    assert RETRY_DELAYS[-1] == 60.0
