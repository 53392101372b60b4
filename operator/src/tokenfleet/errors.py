"""The error a person's bad input raises: a flag, a file, a spec field, a port.

It sits at the package's root and imports nothing of it, so every room (capacity below
engines, the commands and the controller above them) raises the same type without an
import running back up. `capacity.PlanError` is the kind of it for a request that cannot
be planned; the CLI prints either as one line and exits 2.
"""

from __future__ import annotations


class UserError(ValueError):
    """Input a person gave that cannot be used, phrased for that person.

    `field` is the input that is wrong (a CLI flag / spec field / file and key), `value`
    what was given, `fix` what to do. str(error) is a single line suitable for a CLI or a
    status condition message.
    """

    def __init__(self, field: str, value: object, problem: str, fix: str) -> None:
        self.field = field
        self.value = value
        self.problem = problem
        self.fix = fix
        super().__init__(f"{field}={value!s}: {problem}; {fix}")
