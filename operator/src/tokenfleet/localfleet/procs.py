"""Child processes of the local fleet: started in their own session (a Ctrl-C in the
terminal reaches the harness, which stops them in order) and, on Linux, killed by the kernel
if the harness itself dies (PR_SET_PDEATHSIG), so no simulator outlives a crashed demo."""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import os
import signal
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


def spawn(
    argv: Sequence[str], log_path: Path, env: dict[str, str] | None = None
) -> subprocess.Popen[bytes]:
    with log_path.open("ab") as log:
        return subprocess.Popen(
            list(argv),
            stdout=log,
            stderr=subprocess.STDOUT,
            env=env if env is not None else dict(os.environ),
            start_new_session=True,
            preexec_fn=_die_with_parent if sys.platform == "linux" else None,
        )


def tokenfleet(*args: str) -> list[str]:
    """argv for a tokenfleet subcommand in this interpreter (the same venv and PYTHONPATH)."""
    return [sys.executable, "-m", "tokenfleet.cli", *args]


def stop(process: subprocess.Popen[bytes] | None, timeout_s: float = 10.0) -> None:
    """SIGTERM, wait, then SIGKILL; safe on an already finished process."""
    if process is None or process.poll() is not None:
        return
    process.terminate()
    try:
        process.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(timeout=5)
