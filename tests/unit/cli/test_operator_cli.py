"""`tokenfleet operator` refuses what it cannot start with in one line (exit 2), before
kopf starts: no traceback, no retry loop, no /healthz that says 200 meanwhile."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest


def _operator(tmp_path: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("KUBERNETES_")}
    env |= {"KUBECONFIG": str(tmp_path / "no-kubeconfig"), "HOME": str(tmp_path)}
    return subprocess.run(
        [sys.executable, "-m", "tokenfleet.cli", "operator", *argv],
        capture_output=True, text=True, check=False, timeout=60, env=env,
    )  # fmt: skip


def _one_error_line(run: subprocess.CompletedProcess[str]) -> str:
    assert run.returncode == 2, (run.stdout, run.stderr)
    assert "Traceback" not in run.stderr
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), lines
    return lines[0]


@pytest.mark.slow
def test_no_kubeconfig(tmp_path: Path) -> None:
    line = _one_error_line(_operator(tmp_path, "--liveness", "", "--metrics-port", "0"))
    assert "no Kubernetes credentials" in line and "KUBECONFIG" in line


@pytest.mark.slow
def test_liveness_port_busy(tmp_path: Path, busy_port: int) -> None:
    url = f"http://127.0.0.1:{busy_port}/healthz"
    line = _one_error_line(_operator(tmp_path, "--liveness", url, "--metrics-port", "0"))
    assert f"--liveness={url}" in line and "already in use" in line


@pytest.mark.slow
@pytest.mark.parametrize(
    ("argv", "fragment"),
    [
        (["--metrics-port", "99999", "--liveness", ""], "--metrics-port=99999: is not a TCP port"),
        (["--metrics-port", "0", "--liveness", "http://127.0.0.1:99999/healthz"],
         "has no valid port"),
        (["--metrics-port", "0", "--liveness", "http://203.0.113.7:18080/healthz"],
         "is not an address of this machine"),
    ],
)  # fmt: skip
def test_bad_ports(tmp_path: Path, argv: list[str], fragment: str) -> None:
    assert fragment in _one_error_line(_operator(tmp_path, *argv))


@pytest.mark.slow
def test_metrics_port_busy(tmp_path: Path, busy_port: int) -> None:
    # The metrics server binds every interface; a port taken on loopback is busy for it too.
    line = _one_error_line(_operator(tmp_path, "--liveness", "", "--metrics-port", str(busy_port)))
    assert f"--metrics-port={busy_port}" in line and "already in use" in line


def test_a_failed_login_is_one_line_per_retry(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """If the kubeconfig goes away after start, kopf's login retries log one line each."""
    import kopf
    import kubernetes.config.kube_config

    from tokenfleet.controller.handlers import Credentials

    missing = str(tmp_path / "gone")
    monkeypatch.setenv("KUBECONFIG", missing)
    monkeypatch.setattr(kubernetes.config.kube_config, "KUBE_CONFIG_DEFAULT_LOCATION", missing)
    for name in [n for n in os.environ if n.startswith("KUBERNETES_")]:
        monkeypatch.delenv(name)
    with pytest.raises(kopf.TemporaryError) as error:
        Credentials().login(logger=logging.getLogger("test"), settings=None)
    message = str(error.value)
    assert "\n" not in message and "cannot log in to Kubernetes" in message
    assert "KUBECONFIG" in message


@pytest.mark.slow  # over a second: the unit-slow tier
def test_a_picker_cluster_role_that_is_no_name_is_refused(tmp_path: Path) -> None:
    line = _one_error_line(_operator(tmp_path, "--picker-cluster-role", "Bad Role"))
    assert "--picker-cluster-role 'Bad Role'" in line and "tokenfleet-endpoint-picker" in line
