"""The one error type the capacity model raises: it names the field, the value and the fix."""

from __future__ import annotations


class PlanError(ValueError):
    """A request the planner cannot satisfy, phrased for the person who made it.

    `field` is the input that is wrong (a CLI flag / spec field / config key), `value` what
    was given, `fix` what to do. str(error) is a single line suitable for a CLI or a status
    condition message.
    """

    def __init__(self, field: str, value: object, problem: str, fix: str) -> None:
        self.field = field
        self.value = value
        self.problem = problem
        self.fix = fix
        super().__init__(f"{field}={value!s}: {problem}; {fix}")
