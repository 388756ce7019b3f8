"""Fire-and-forget tasks that a component still owns: kept referenced until done (asyncio keeps
only a weak reference to a task), waited for by ``drain`` and cancelled by ``cancel`` on stop."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any

__all__ = ["Background"]


class Background:
    """The tasks a sink started (a webhook post, a push): none is lost, none outlives its owner."""

    def __init__(self) -> None:
        self._tasks: set[asyncio.Task[Any]] = set()

    def __len__(self) -> int:
        return len(self._tasks)

    def spawn(self, coro: Coroutine[Any, Any, Any]) -> None:
        """Run ``coro`` on the running loop; without one (a synchronous caller, a test) it is
        closed unrun rather than left to warn that it was never awaited."""
        try:
            task = asyncio.get_running_loop().create_task(coro)
        except RuntimeError:
            coro.close()
            return
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def drain(self) -> None:
        """Wait until every task, and every task those started, is done."""
        while self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)

    async def cancel(self) -> None:
        """Cancel what is under way and wait for it to unwind."""
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
