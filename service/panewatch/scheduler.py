"""When panes are fed and read: the feed budget, backpressure, the sweep and change mode.

One component with an injected clock, so its rules are tested by moving a clock by hand:

- bytes a host delivers wait in the pane; they are fed to its screen in slices of at most
  ``feed_budget`` bytes per pane per tick, round-robin, within ``tick_budget_s``: a pane that
  floods output cannot starve the others or the HTTP server;
- a pane whose backlog passes ``high_water`` stops being read until it drains below
  ``low_water`` (its agent blocks on write, as behind a terminal that cannot keep up);
- the sweep reads every pane whose screen or signals moved, every ``sweep_s``;
- change mode reads a pane once its output pauses (``settle_s``), at most ``cap_s`` after a
  big change (a dialog, a whole repaint); after small changes (a spinner frame, a status line
  erased) it reads the pane once its output has stopped for ``pause_s``: an agent that finishes
  or asks stops drawing, while a working one keeps its spinner going and is not read per frame.
  Those pause reads share one timer (a heap of due times on a 10 ms grid), not a timer per pane
  and burst: that wake-up per burst was what made change mode cost more than the sweep. A pane
  whose output never pauses is still read by the sweep every ``backstop_s``.
"""

from __future__ import annotations

import heapq
import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal, Protocol

from .clock import Clock, Timer
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
    grain_s: float = 0.01  # pause reads due within one grain share a wake-up
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

    def sweep(self, now: float) -> None:
        """Read every pane that needs it."""

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
        self._timers: dict[str, Timer] = {}
        self._first_big: dict[str, float] = {}  # change mode: first unread big change
        self._pauses: list[tuple[float, str]] = []  # change mode: (due, key), a heap
        self._pausing: set[str] = set()  # keys with an entry in the heap
        self._pause_timer: Timer | None = None
        self._sweep_timer: Timer | None = None
        # figures for /metrics and the benchmark
        self.sweeps = 0
        self.sweep_seconds: list[float] = []
        self.sweep_seconds_sum = 0.0

    # -- lifecycle -------------------------------------------------------------------------
    def start(self) -> None:
        self._sweep_timer = self.clock.call_at(self.clock.time() + self.timing.sweep_interval, self._sweep)

    def stop(self) -> None:
        if self._sweep_timer is not None:
            self._sweep_timer.cancel()
            self._sweep_timer = None
        for timer in self._timers.values():
            timer.cancel()
        self._timers.clear()
        if self._pause_timer is not None:
            self._pause_timer.cancel()
            self._pause_timer = None

    def add(self, key: str, pane: Pane) -> None:
        self._panes[key] = pane

    def forget(self, key: str) -> None:
        self._panes.pop(key, None)
        self._feeding.pop(key, None)
        self._paused.discard(key)
        timer = self._timers.pop(key, None)
        if timer is not None:
            timer.cancel()
        self._first_big.pop(key, None)
        self._pausing.discard(key)  # its heap entry is dropped when it comes up

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
        t0 = self.perf()
        try:
            self.flow.sweep(self.clock.time())
        finally:
            took = self.perf() - t0
            self.sweeps += 1
            self.sweep_seconds.append(took)
            self.sweep_seconds_sum += took
            if len(self.sweep_seconds) > 2048:
                del self.sweep_seconds[:1024]
            self._sweep_timer = self.clock.call_at(self.clock.time() + self.timing.sweep_interval, self._sweep)

    # -- change mode -----------------------------------------------------------------------
    def _hot(self, pane: Pane, now: float) -> bool:
        """Enough output to read at once, or the tail of a repaint that was just read."""
        return pane.unread_bytes >= self.timing.change_bytes or now < pane.hot_until

    def _schedule_change(self, key: str, pane: Pane) -> None:
        """Read once output pauses (``settle_s``), no later than ``cap_s`` after a big change.
        A small change (a spinner frame) waits for the sweep: a dialog is a repaint of hundreds
        of bytes, and a timer per 60-byte frame costs a wake-up and a read for nothing."""
        t, now = self.timing, self.clock.time()
        if not self._hot(pane, now):
            self._watch_pause(key, pane)
            return
        self._unwatch_pause(key)  # the big change's timer reads it: no second wake-up for it
        first = self._first_big.setdefault(key, now)
        due = min(now + t.settle_s, first + t.cap_s)
        timer = self._timers.get(key)
        if timer is not None:
            if timer.when() <= due:
                return
            timer.cancel()
        self._timers[key] = self.clock.call_at(due, lambda: self._change_due(key))

    def _change_due(self, key: str) -> None:
        self._timers.pop(key, None)
        pane = self._panes.get(key)
        if pane is None:
            return
        t, now = self.timing, self.clock.time()
        if self._hot(pane, now):
            first = self._first_big.get(key, now)
            quiet = now - pane.last_output >= t.settle_s - 1e-3
            if not quiet and now - first < t.cap_s - 1e-6:  # (a float tie must not re-arm at `now`)
                self._schedule_change(key, pane)
                return
            if pane.unread_bytes >= t.change_bytes:
                # the tail of a big repaint, split over reads, is read promptly too
                pane.hot_until = now + 2 * t.settle_s
        self._first_big.pop(key, None)
        self._read(key, pane, now)

    def _read(self, key: str, pane: Pane, now: float) -> None:
        if pane.pending:
            pane.feed_all()
            self.flow.fed(key)
            self.drained(key)
        self.flow.due(key, now)
        pane.unread_bytes = 0

    # -- change mode: reads when output pauses, one timer for every pane ----------------
    def _watch_pause(self, key: str, pane: Pane) -> None:
        if key in self._pausing:
            return  # its entry is pushed back when it comes up, if output went on
        self._pausing.add(key)
        due = pane.last_output + self._pause(pane)
        heapq.heappush(self._pauses, (due, key))
        self._arm_pauses(due)

    def _unwatch_pause(self, key: str) -> None:
        """Drop the pane's pause watch; if the shared timer was set for it, set it for the next
        pane instead (a wake-up with nothing to read costs as much as one with a read)."""
        if key not in self._pausing:
            return
        self._pausing.discard(key)
        heap = self._pauses
        while heap and heap[0][1] not in self._pausing:
            heapq.heappop(heap)
        if not heap and self._pause_timer is not None:
            self._pause_timer.cancel()
            self._pause_timer = None
        elif heap and self._pause_timer is not None and self._pause_timer.when() < heap[0][0] - self.timing.grain_s:
            self._pause_timer.cancel()
            self._pause_timer = None
            self._arm_pauses(heap[0][0])

    def _pause(self, pane: Pane) -> float:
        """How long the pane's output must stop to count as a pause: ``pause_s``, or 1.3× the
        pane's own rhythm when it draws slower (a spinner ticking every 120-150 ms on a busy
        machine is not pausing at every tick; 1.3×: 30 % jitter), at most ``RHYTHM_MAX_S``."""
        return max(self.timing.pause_s, min(1.3 * pane.rhythm, RHYTHM_MAX_S))

    def _arm_pauses(self, due: float) -> None:
        grain = self.timing.grain_s
        due = math.ceil(due / grain - 1e-6) * grain
        timer = self._pause_timer
        if timer is not None:
            if timer.when() <= due:
                return
            timer.cancel()
        self._pause_timer = self.clock.call_at(due, self._pause_tick)

    def _pause_tick(self) -> None:
        self._pause_timer = None
        now, heap = self.clock.time(), self._pauses
        while heap and heap[0][0] <= now + 1e-6:
            _, key = heapq.heappop(heap)
            pane = self._panes.get(key)
            if pane is None or key not in self._pausing:
                continue
            due = pane.last_output + self._pause(pane)
            if due > now + 1e-6:  # output went on: look again when it may have stopped
                heapq.heappush(heap, (due, key))
                continue
            self._pausing.discard(key)
            if pane.unread_bytes and key not in self._timers:  # (a big change's timer reads it itself)
                self._read(key, pane, now)
        if heap:
            self._arm_pauses(heap[0][0])

    def flowing(self, pane: Pane, now: float) -> bool:
        """Change mode: the pane's output has not paused and it was read within
        ``backstop_s``: the sweep leaves it to the pause read (its spinner is still going)."""
        t = self.timing
        return t.mode == "change" and now - pane.last_output < self._pause(pane) and now - pane.read_at < t.backstop_s
