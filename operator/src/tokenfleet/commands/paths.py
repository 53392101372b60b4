"""Checks on the files a command will write, made before any work starts: a long run that
ends on "no such directory" wastes the run."""

from __future__ import annotations

from pathlib import Path

from tokenfleet.errors import UserError


def check_output_file(flag: str, value: str, suffix: str = "") -> Path:
    """The path, if its directory exists (and it ends in `suffix`), else a UserError naming
    the flag, the value and the fix."""
    path = Path(value)
    if suffix and path.suffix.lower() != suffix:
        raise UserError(
            flag, value, f"is not a {suffix} file name", f"give a path ending in {suffix}"
        )
    parent = path.parent
    if not parent.is_dir():
        raise UserError(
            flag, value, f"directory {parent} does not exist", "create it or pick another path"
        )
    if path.is_dir():
        raise UserError(
            flag, value, "is a directory", f"give a file name, e.g. {path / 'plot'}{suffix}"
        )
    return path
