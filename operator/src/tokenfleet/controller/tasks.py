"""The per-LLMService loops' tasks (autoscaler, adapter sync): stopped all at once."""

from __future__ import annotations

import asyncio
from collections.abc import MutableMapping
from typing import Any


async def cancel_all(tasks: MutableMapping[Any, asyncio.Task[None]]) -> None:
    """Cancel every task, wait until each has ended (its error, if any, is its own loop's
    to log), and forget them."""
    running = list(tasks.values())
    for task in running:
        task.cancel()
    await asyncio.gather(*running, return_exceptions=True)
    tasks.clear()
