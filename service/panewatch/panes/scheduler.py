"""When panes are fed and read: the feed budget, backpressure, the sweep and change mode.

One component with an injected clock, so its rules are tested by moving a clock by hand:

- bytes a host delivers wait in the pane; they are fed to its screen in slices of at most
  ``feed_budget`` bytes per pane per tick, round-robin, within ``tick_budget_s``: a pane that
  floods output cannot starve the others or the HTTP server;
- a pane whose backlog passes ``high_water`` stops being read until it drains below
  ``low_water`` (its agent blocks on write, as behind a terminal that cannot keep up);
- the sweep reads every pane whose screen or signals moved, every ``sweep_s``;
- change mode reads a pane once its output pauses (``settle_s``), at most ``cap_s`` after a
  big change (a burst of at least ``change_bytes``: a dialog, a whole repaint); after small
  changes (a spinner frame, a status line erased) it reads the pane once its output has stopped
  for ``pause_s``: an agent that finishes or asks stops drawing, while a working one keeps its
  spinner going and is not read per frame. Big is one burst's size (``Pane.burst_bytes``), not
  what piled up since the last read: four 70-byte spinner frames are not a repaint.
  Every pane's planned read is an entry in one heap and one timer (on a ``grain_s`` grid) waits
  for the first: output only moves its pane's due time, so a pane that keeps drawing costs no
  wake-up at all (what this planning, and reading each change alone, still cost beside the
  sweep is measured in benchmarks/RESULTS.md). A pane whose output never pauses is still read
  by the sweep every ``backstop_s``.
"""

from __future__ import annotations

import heapq
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal, Protocol

from ..clock import Clock, Timer
from .pane import RHYTHM_MAX_S, Pane

Mode = Literal["sweep", "change"]


@dataclass(frozen=True)
class Timing:
    mode: Mode = "sweep"
    sweep_s: float = 0.7
    settle_s: float = 0.04
    cap_s: float = 0.15
    change_bytes: int = 256
    pause_s: float = 0.12  # least pause; a pane drawing at a slower rhythm needs 1.3× its gap
    backstop_s: float = 2.8
    grain_s: float = 0.02  # reads due within one grain share a wake-up
    feed_budget: int = 16 * 1024
    tick_budget_s: float = 0.02
    high_water: int = 512 * 1024
    low_water: int = 64 * 1024

    @property
    def sweep_interval(self) -> float:
        """Both modes sweep every ``sweep_s``: in change mode the sweep is the shared tick that
        reads small changes (and notices reports going stale)."""
        return self.sweep_s


class Flow(Protocol):
    """What the scheduler asks of the engine."""

    def fed(self, key: str) -> None:
        """The pane's screen moved (wake its screen watchers)."""

    def pause(self, key: str) -> None:
        """Stop reading the pane's host (backlog above high water)."""

    def resume(self, key: str) -> None: ...

    def sweep(self, now: float, spent: Callable[[], bool]) -> bool:
        """Read every pane that needs it; once ``spent()`` says the turn's time is up, stop and
        return False (called again at the next turn, it goes on where it stopped)."""

    def due(self, key: str, now: float) -> None:
        """Change mode: read this pane now if anything moved."""


class Scheduler:
    """Feeding, backpressure and reading for every pane of one engine."""

    def __init__(self, clock: Clock, timing: Timing, flow: Flow, perf: Callable[[], float] = time.perf_counter) -> None:
        self.clock, self.timing, self.flow, self.perf = clock, timing, flow, perf
        self._panes: dict[str, Pane] = {}
        self._feeding: dict[str, Pane] = {}  # insertion-ordered: round-robin
        self._feed_scheduled = False
        self._paused: set[str] = set()
        # change mode: when each pane is to be read, a heap of (due, key) whose first entry
        # holds the one timer; an entry is alive while ``_due[key]`` is its time
        self._due: dict[str, float] = {}
        self._reads: list[tuple[float, str]] = []
        self._big: dict[str, float] = {}  # when the pane's first unread big change came
        self._read_timer: Timer | None = None
        self._sweep_timer: Timer | None = None
        # figures for /metrics and the benchmark
        self.sweeps = 0
        self.sweep_seconds: list[float] = []
        self.sweep_seconds_sum = 0.0
        self._sweep_took = 0.0  # the sweep under way, over its slices

    # -- lifecycle -------------------------------------------------------------------------
    def start(self) -> None:
        self._sweep_timer = self.clock.call_at(self.clock.time() + self.timing.sweep_interval, self._sweep)

    def stop(self) -> None:
        if self._sweep_timer is not None:
            self._sweep_timer.cancel()
            self._sweep_timer = None
        if self._read_timer is not None:
            self._read_timer.cancel()
            self._read_timer = None

    def add(self, key: str, pane: Pane) -> None:
        self._panes[key] = pane

    def forget(self, key: str) -> None:
        self._panes.pop(key, None)
        self._feeding.pop(key, None)
        self._paused.discard(key)
        self._due.pop(key, None)  # its heap entry is dead: dropped when it comes up
        self._big.pop(key, None)

    def backlog(self) -> int:
        """The largest backlog (bytes received, not yet emulated) of any pane right now."""
        return max((len(p.pending) for p in self._panes.values()), default=0)

    # -- output and feeding ----------------------------------------------------------------
    def output(self, key: str) -> None:
        """Bytes were just delivered to the pane ``key`` (``Pane.receive``)."""
        pane = self._panes.get(key)
        if pane is None:
            return
        self._feeding.setdefault(key, pane)
        if len(pane.pending) > self.timing.high_water and key not in self._paused:
            self._paused.add(key)
            self.flow.pause(key)
        if not self._feed_scheduled:
            self._feed_scheduled = True
            self.clock.call_soon(self._feed_tick)
        if self.timing.mode == "change":
            self._schedule_change(key, pane)

    def _feed_tick(self) -> None:
        """Feed one slice at a time, round-robin (a pane with more to feed goes to the back),
        until the tick's time budget is spent; at least one slice per tick."""
        self._feed_scheduled = False
        budget, start = self.timing.tick_budget_s, self.perf()
        while self._feeding:
            key = next(iter(self._feeding))
            pane = self._feeding.pop(key)
            if pane.feed(self.timing.feed_budget):
                self.flow.fed(key)
            if pane.pending:
                self._feeding[key] = pane
            self._maybe_resume(key, pane)
            if self.perf() - start >= budget:
                break
        if self._feeding:
            self._feed_scheduled = True
            self.clock.call_soon(self._feed_tick)
        if (
            self._reads
            and self._reads[0][0] <= self.clock.time() + self.timing.grain_s
            and self.perf() - start < budget
        ):
            self._read_tick(early=True, start=start)

    def _maybe_resume(self, key: str, pane: Pane) -> None:
        if key in self._paused and len(pane.pending) < self.timing.low_water:
            self._paused.discard(key)
            if not pane.exited:
                self.flow.resume(key)

    def drained(self, key: str) -> None:
        """The engine fed the whole backlog itself (a read right before a write)."""
        pane = self._panes.get(key)
        if pane is not None and not pane.pending:
            self._feeding.pop(key, None)
            self._maybe_resume(key, pane)

    # -- the sweep -------------------------------------------------------------------------
    def _sweep(self) -> None:
        """One sweep, in slices of at most ``tick_budget_s`` (one per loop turn): a sweep over
        a thousand panes must not hold the loop for all of them at once."""
        t0 = self.perf()
        budget = self.timing.tick_budget_s
        done = self.flow.sweep(self.clock.time(), lambda: self.perf() - t0 >= budget)
        self._sweep_took += self.perf() - t0
        if not done:
            self._sweep_timer = self.clock.call_at(self.clock.time(), self._sweep)
            return
        took, self._sweep_took = self._sweep_took, 0.0
        self.sweeps += 1
        self.sweep_seconds.append(took)
        self.sweep_seconds_sum += took
        if len(self.sweep_seconds) > 2048:
            del self.sweep_seconds[:1024]
        self._sweep_timer = self.clock.call_at(self.clock.time() + self.timing.sweep_interval, self._sweep)

    # -- change mode: one heap of due reads, one timer for every pane ----------------------
    def _schedule_change(self, key: str, pane: Pane) -> None:
        """Plan the pane's read: a big change (a dialog, a repaint of hundreds of bytes) once
        output pauses for ``settle_s``, at most ``cap_s`` after it began; a small one (a spinner
        frame) once output stops for ``_pause``. Nothing wakes the loop per frame: a pane still
        drawing only moves its own due time, and only the earliest due time holds the timer."""
        if key not in self._big and pane.burst_bytes >= self.timing.change_bytes:
            self._big[key] = self.clock.time()
        when = self._when(key, pane)
        planned = self._due.get(key)
        if planned is None or when < planned - 1e-9:
            self._push(key, when)
        elif self._reads[0][1] == key and self._reads[0][0] == planned:
            self._settle_top()  # the timer waits for this pane: move it, do not wake for nothing
        else:
            return
        self._arm()

    def _when(self, key: str, pane: Pane) -> float:
        """When the pane is to be read, from its last output (see ``_schedule_change``)."""
        first = self._big.get(key)
        if first is not None:
            return min(pane.last_output + self.timing.settle_s, first + self.timing.cap_s)
        return pane.last_output + self._pause(pane)

    def _push(self, key: str, when: float) -> None:
        self._due[key] = when
        heapq.heappush(self._reads, (when, key))

    def _settle_top(self) -> None:
        """Make the heap's first entry true: drop the dead (a pane forgotten, or planned again
        earlier) and move a pane whose output went on to its real due time. Entries below the
        first may be early; each is corrected when it comes up."""
        heap = self._reads
        while heap:
            when, key = heap[0]
            pane = self._panes.get(key)
            if pane is None or self._due.get(key) != when:
                heapq.heappop(heap)
                continue
            real = self._when(key, pane)
            if real <= when + 1e-9:
                return
            heapq.heapreplace(heap, (real, key))
            self._due[key] = real

    def _arm(self) -> None:
        """One timer, on a grid of ``grain_s``, for the first due read of any pane."""
        self._settle_top()
        timer = self._read_timer
        if not self._reads:
            if timer is not None:
                timer.cancel()
                self._read_timer = None
            return
        grain = self.timing.grain_s
        at = round(self._reads[0][0] / grain) * grain
        if timer is not None:
            if abs(timer.when() - at) < grain / 2:
                return
            timer.cancel()
        self._read_timer = self.clock.call_at(at, self._read_tick)

    def _read_tick(self, early: bool = False, start: float | None = None) -> None:
        """Read every pane due by now, or within half a grain of it: they share this wake-up.
        ``early``: the loop is awake anyway (output was just fed), so reads due within a whole
        grain are done now rather than in a wake-up of their own. At most ``tick_budget_s``
        (from ``start``) per turn: what is left is due at once, so read at the next turn."""
        if not early:
            self._read_timer = None
        t, now, heap = self.timing, self.clock.time(), self._reads
        start = self.perf() if start is None else start
        self._settle_top()
        while heap and heap[0][0] <= now + (t.grain_s if early else t.grain_s / 2) + 1e-6:
            _, key = heapq.heappop(heap)
            del self._due[key]
            pane = self._panes[key]  # (_settle_top leaves a known pane first)
            # a repaint still going on when ``cap_s`` made it read stays one burst: its tail
            # is big too, and read at its own settle
            if self._big.pop(key, None) is not None or pane.unread_bytes:
                self._read(key, pane, now)
            self._settle_top()
            if self.perf() - start >= t.tick_budget_s:
                break
        self._arm()

    def _read(self, key: str, pane: Pane, now: float) -> None:
        if pane.pending:
            pane.feed_all()
            self.flow.fed(key)
            self.drained(key)
        self.flow.due(key, now)
        pane.unread_bytes = 0

    def _pause(self, pane: Pane) -> float:
        """How long the pane's output must stop to count as a pause: ``pause_s``, or 1.3× the
        pane's own rhythm when it draws slower (a spinner ticking every 120-150 ms on a busy
        machine is not pausing at every tick; 1.3×: 30 % jitter), at most ``RHYTHM_MAX_S``."""
        return max(self.timing.pause_s, min(1.3 * pane.rhythm, RHYTHM_MAX_S))

    def flowing(self, pane: Pane, now: float) -> bool:
        """Change mode: the pane's output has not paused and it was read within
        ``backstop_s``: the sweep leaves it to the pause read (its spinner is still going)."""
        t = self.timing
        return t.mode == "change" and now - pane.last_output < self._pause(pane) and now - pane.read_at < t.backstop_s
