"""The error the capacity model raises for a request it cannot plan."""

from __future__ import annotations

from tokenfleet.errors import UserError


class PlanError(UserError):
    """A request the planner cannot satisfy (nothing fits, the SLO is out of reach, the
    layout asked for is impossible), phrased for the person who made it: `field`, `value`,
    `problem` and `fix` as in UserError. Bad flags and files that are not a plan raise
    UserError itself."""
