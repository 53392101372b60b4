"""Re-export: the scheduler core moved to `tokenfleet.scheduling.core`, below both the capacity
model (which runs it in virtual time for plan()) and this simulator (which serves HTTP on it)."""

from tokenfleet.scheduling.core import (
    Arrival,
    FastForward,
    ScheduledStep,
    Scheduler,
    SchedulerConfig,
    SimRequest,
    StepOutcome,
    StepTimer,
    simulate,
)

__all__ = [
    "Arrival",
    "FastForward",
    "ScheduledStep",
    "Scheduler",
    "SchedulerConfig",
    "SimRequest",
    "StepOutcome",
    "StepTimer",
    "simulate",
]
