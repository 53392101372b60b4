"""kopf settings the operator sets from its options (controller/handlers.configure_settings)."""

from __future__ import annotations

import kopf
import pytest

from tokenfleet.controller.handlers import Options, configure_settings


@pytest.mark.parametrize(
    ("namespaces", "scan"),
    [
        ((), True),  # every namespace: kopf watches cluster-wide, no scan needed, left as is
        (("team-a",), False),  # named: nothing to discover, so no cluster-wide namespace list
        (("team-a", "team-b"), False),
        (("team-*",), True),  # a pattern: kopf must list namespaces to match it
        (("team-a", "!team-b"), True),
    ],
)
def test_named_namespaces_turn_off_the_cluster_wide_namespace_scan(
    namespaces: tuple[str, ...], scan: bool
) -> None:
    settings = kopf.OperatorSettings()
    configure_settings(settings, Options(namespaces=namespaces))
    assert settings.scanning.disabled is not scan
