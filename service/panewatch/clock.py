"""Time as the engine sees it: read the time, run something later. Injected, so that the
scheduler and the panes are tested with a hand-moved clock instead of sleeping."""

from __future__ import annotations

import asyncio
import heapq
import itertools
from collections.abc import Callable
from typing import Protocol


class Timer(Protocol):
    def cancel(self) -> None: ...
    def when(self) -> float: ...


class Clock(Protocol):
    def time(self) -> float:
        """Monotonic seconds."""

    def call_at(self, when: float, fn: Callable[[], None]) -> Timer: ...

    def call_soon(self, fn: Callable[[], None]) -> None: ...

    async def sleep(self, seconds: float) -> None:
        """Let ``seconds`` pass (other tasks run meanwhile)."""


class LoopClock:
    """The running event loop's clock and timers."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop

    def time(self) -> float:
        return self.loop.time()

    def call_at(self, when: float, fn: Callable[[], None]) -> Timer:
        return self.loop.call_at(when, fn)

    def call_soon(self, fn: Callable[[], None]) -> None:
        self.loop.call_soon(fn)

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)


class _ManualTimer:
    def __init__(self, when: float) -> None:
        self._when = when
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True

    def when(self) -> float:
        return self._when


class ManualClock:
    """A clock that moves only when told (``advance``), running what falls due, in order."""

    def __init__(self, start: float = 1000.0) -> None:
        self.now = start
        self._queue: list[tuple[float, int, _ManualTimer, Callable[[], None]]] = []
        self._order = itertools.count()

    def time(self) -> float:
        return self.now

    def call_at(self, when: float, fn: Callable[[], None]) -> Timer:
        timer = _ManualTimer(when)
        heapq.heappush(self._queue, (when, next(self._order), timer, fn))
        return timer

    def call_soon(self, fn: Callable[[], None]) -> None:
        self.call_at(self.now, fn)

    async def sleep(self, seconds: float) -> None:
        """Simulated waiting: time moves by ``seconds`` at once (running what falls due), and
        the loop gets one turn so that hosts' callbacks run."""
        await asyncio.sleep(0)
        self.advance(seconds)
        await asyncio.sleep(0)

    def tick(self) -> int:
        """Run what is due now and was scheduled before this call: one turn of a loop."""
        due = []
        while self._queue and self._queue[0][0] <= self.now:
            due.append(heapq.heappop(self._queue))
        for _, _, timer, fn in due:
            if not timer.cancelled:
                fn()
        return len(due)

    def run_due(self) -> int:
        """Run everything due now (including what that schedules for now); how many ran."""
        ran = 0
        while self._queue and self._queue[0][0] <= self.now:
            _, _, timer, fn = heapq.heappop(self._queue)
            if not timer.cancelled:
                fn()
                ran += 1
        return ran

    def advance(self, seconds: float) -> None:
        """Move time forward by ``seconds``, stopping at each timer on the way, in order."""
        end = self.now + seconds
        while True:
            self.run_due()
            if not self._queue or self._queue[0][0] > end:
                break
            self.now = max(self.now, self._queue[0][0])
        self.now = end
        self.run_due()
