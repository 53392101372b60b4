"""--allow-prometheus: which spec.autoscaling.prometheus.url an operator accepts."""

from __future__ import annotations

import pytest

from tokenfleet.controller.autoscaler import AutoscalerOptions
from tokenfleet.controller.prometheus_source import allowed_url, refused_url_message

OWN = "http://prometheus-operated.monitoring:9090"


@pytest.mark.parametrize(
    ("url", "allowed", "ok"),
    [
        (OWN, (OWN,), True),
        (OWN + "/", (OWN,), True),
        (OWN + "/prometheus", (OWN,), True),  # a path below an allowed URL
        ("http://prometheus-operated.monitoring:90901", (OWN,), False),  # not a host prefix
        ("http://kube-apiserver:443", (OWN,), False),
        ("http://169.254.169.254/latest", (OWN,), False),
        (OWN, (), False),
    ],
)
def test_allowed_url(url: str, allowed: tuple[str, ...], ok: bool) -> None:
    assert allowed_url(url, allowed) is ok


def test_the_default_allows_only_the_operators_own_url() -> None:
    assert AutoscalerOptions(prometheus_url=OWN).allowed() == (OWN,)
    assert AutoscalerOptions().allowed() == ()
    extra = AutoscalerOptions(prometheus_url=OWN, allowed_prometheus=("http://thanos:9090",))
    assert extra.allowed() == ("http://thanos:9090",)


def test_the_refusal_names_the_field_the_value_and_the_fix() -> None:
    message = refused_url_message("http://evil:80", (OWN,))
    assert "spec.autoscaling.prometheus.url 'http://evil:80'" in message
    assert OWN in message and "--allow-prometheus" in message
