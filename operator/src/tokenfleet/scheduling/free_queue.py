"""The prefix cache's free queue, as far as a preempted request's own prefix needs it.

vLLM frees a request's blocks to the tail of its FreeKVCacheBlockQueue (the blocks past the
computed prefix first, then the prefix's full blocks from the last to the first) and
allocates from the head. So of a preempted request's full blocks, those no allocation has
taken since are a prefix, which it hits when it comes back.

The queue is kept as runs of consecutive units (blocks for the scheduler core, tokens for the
fleet replay's FastReplica), and only while a preempted request's run is in it: with none,
every free unit is alike. Allocations are not recorded one by one: every unit that left the
queue other than by a hit was allocated from its head, so the head's share is settled from
the counts when a hit is looked up (settle).
"""

from __future__ import annotations

from collections import deque
from typing import Generic, TypeVar

Owner = TypeVar("Owner")


class FreeRun(Generic[Owner]):
    """`count` consecutive units: a preempted request's prefix, still cached (`owner`), or
    units nobody will hit (owner None)."""

    # A plain class: mypyc compiles no generic dataclass (it cannot set the class's __dict__).
    def __init__(self, owner: Owner | None, count: int) -> None:
        self.owner = owner
        self.count = count


class FreeQueue(Generic[Owner]):
    def __init__(self) -> None:
        self.runs: deque[FreeRun[Owner]] = deque()
        self.live = 0  # owned runs in the queue
        self._appended = 0  # units put in the queue since it started over
        self._hit_taken = 0  # units that left it as prefix-cache hits
        self._popped = 0  # units taken from its head, as far as settle applied them

    def restart(self, free: int) -> None:
        """Start over with the `free` units there are, all alike."""
        self.runs.clear()
        self._appended = self._hit_taken = self._popped = 0
        self.append(None, free)

    def append(self, owner: Owner | None, count: int) -> FreeRun[Owner] | None:
        """`count` units freed to the tail; the new run where `owner` keeps them cached."""
        if count <= 0:
            return None
        self._appended += count
        runs = self.runs
        if owner is None and runs and runs[-1].owner is None:
            runs[-1].count += count
            return None
        run = FreeRun(owner, count)
        runs.append(run)
        if owner is None:
            return None
        self.live += 1
        return run

    def settle(self, free: int) -> list[FreeRun[Owner]]:
        """Take from the head what was allocated since the last call, `free` units being free
        now; the owned runs this used up (their owners' prefixes are gone)."""
        popped = self._appended - self._hit_taken - free
        due = popped - self._popped
        self._popped = popped
        runs = self.runs
        gone: list[FreeRun[Owner]] = []
        while runs and (due > 0 or runs[0].count == 0):
            head = runs[0]
            take = min(max(due, 0), head.count)
            head.count -= take
            due -= take
            if head.count == 0:
                if head.owner is not None:
                    self.live -= 1
                    gone.append(head)
                runs.popleft()
        return gone

    def take_hit(self, run: FreeRun[Owner], hit: int) -> None:
        """`hit` units of the run's head leave as its owner's prefix-cache hit; the run's
        older (tail) units stay, uncached."""
        run.count -= hit
        self._hit_taken += hit
        self.disown(run)

    def disown(self, run: FreeRun[Owner]) -> None:
        """The run's owner will not come back for it: units nobody will hit."""
        run.owner = None
        self.live -= 1
