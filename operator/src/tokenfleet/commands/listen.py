"""One-line errors for the ports and hosts a command listens on (sim, operator).

A busy port, a port out of range, an address this machine does not have and a host name
that does not resolve are the user's to fix: each becomes a UserError that names the flag,
the value and what to do, which the CLI prints as one line (exit 2) instead of a traceback.
"""

from __future__ import annotations

import errno
import socket

from tokenfleet.errors import UserError


def check_port(flag: str, port: int, allow_zero: bool = False) -> None:
    low = 0 if allow_zero else 1
    if not low <= port <= 65535:
        hint = " (0 disables it)" if allow_zero else ""
        raise UserError(flag, port, "is not a TCP port", f"use {low}-65535{hint}")


def bind_error(
    error: OSError, host: str, port: int, host_flag: str, port_flag: str, shown: str | None = None
) -> UserError:
    """Translate the OSError of a failed bind / listen into what the user should change.
    `shown`: the value to print when one flag holds both (a URL such as --liveness)."""
    made = _bind_error(error, host, port, host_flag, port_flag)
    if shown is None:
        return made
    return UserError(made.field, shown, made.problem, made.fix)


def _bind_error(error: OSError, host: str, port: int, host_flag: str, port_flag: str) -> UserError:
    if isinstance(error, socket.gaierror):
        return UserError(
            host_flag,
            host,
            f"cannot be resolved ({error.strerror})",
            "use an IP address (127.0.0.1, 0.0.0.0) or a name this machine resolves",
        )
    if error.errno == errno.EADDRINUSE:
        return UserError(
            port_flag,
            port,
            f"{host}:{port} is already in use by another process",
            f"stop that process or pass another {port_flag}",
        )
    if error.errno == errno.EADDRNOTAVAIL:
        return UserError(
            host_flag,
            host,
            "is not an address of this machine",
            "use 127.0.0.1 (this machine only), 0.0.0.0 (every interface) or one of its addresses",
        )
    if error.errno == errno.EACCES:
        return UserError(
            port_flag,
            port,
            "needs privileges (ports below 1024 are reserved)",
            f"pass a {port_flag} of 1024 or above",
        )
    return UserError(
        port_flag, port, f"cannot listen on {host}:{port} ({error.strerror or error})", "check it"
    )
