"""The pure continuous-batching scheduler core, below both `capacity` and `sim`.

- core.py     the vLLM-V1-style scheduler on a virtual clock (KV blocks, max-num-seqs,
              chunked prefill, recompute preemption), plus fast-forward over decode steps.
- lazy.py     the same scheduler with lazy decode accounting (a decoder's progress is the
              step counter's difference): the same decisions, each step O(prefills), for
              the virtual runs; the simulator keeps the eager one (per-token timestamps).
- virtual.py  closed- and open-loop load runs on it in virtual time: TTFT / ITL / TPOT
              percentiles and throughput, as `vllm bench serve` would report them.

Nothing here imports `capacity` or `sim`: the step timer is any object with step_seconds().
"""

from tokenfleet.scheduling import core as _core
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

COMPILED = not _core.__file__.endswith(".py")
"""Whether this core runs compiled (mypyc: setup.py's TOKENFLEET_COMPILE=1 build, as the
operator image ships it) or as Python source. Both plan the same, to the bit."""

__all__ = [
    "COMPILED",
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
