"""The real `tokenfleet operator` process, logged in to the emulated API by kubeconfig."""

from __future__ import annotations

import argparse
import os
import subprocess
from pathlib import Path

from tokenfleet.localfleet import procs
from tokenfleet.localfleet.prometheus import free_port


def operator_flags() -> set[str]:
    """The option strings `tokenfleet operator` accepts in this build."""
    from tokenfleet.cli import build_parser

    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return set(sub.choices["operator"]._option_string_actions)


def operator_argv(prometheus_url: str, time_scale: float, metrics_port: int) -> list[str]:
    flags = operator_flags()
    args = ["operator", "--standalone", "--liveness", "", "--metrics-port", str(metrics_port)]
    if "--prometheus-url" in flags:
        args += ["--prometheus-url", prometheus_url]
    if time_scale != 1.0:
        if "--time-scale" not in flags:
            raise RuntimeError(
                f"time scale {time_scale:g} needs `tokenfleet operator --time-scale`, which "
                "this build lacks; run the fleet at --time-scale 1"
            )
        args += ["--time-scale", f"{time_scale:g}"]
    return procs.tokenfleet(*args)


class OperatorProcess:
    def __init__(self, workdir: Path, kubeconfig: Path, prometheus_url: str, time_scale: float):
        self.log_path = workdir / "operator.log"
        self.metrics_port = free_port()
        self.argv = operator_argv(prometheus_url, time_scale, self.metrics_port)
        self.env = {**os.environ, "KUBECONFIG": str(kubeconfig)}
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        self.process = procs.spawn(self.argv, self.log_path, self.env)

    @property
    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def log_tail(self, chars: int = 3000) -> str:
        return self.log_path.read_text(errors="replace")[-chars:] if self.log_path.exists() else ""

    def stop(self) -> None:
        procs.stop(self.process, timeout_s=20)
