"""When panes are fed and read: the feed budget, backpressure, the sweep and change mode.

One component with an injected clock, so its rules are tested by moving a clock by hand:

- bytes a host delivers wait in the pane; they are fed to its screen in slices of at most
  ``feed_budget`` bytes per pane per tick, round-robin, within ``tick_budget_s``: a pane that
  floods output cannot starve the others or the HTTP server;
- a pane whose backlog passes ``high_water`` stops being read until it drains below
  ``low_water`` (its agent blocks on write, as behind a terminal that cannot keep up);
- the sweep reads every pane whose screen or signals moved, every ``sweep_s``;
- change mode reads a pane once its output pauses (``settle_s``), at most ``cap_s`` after a
  big change; small changes (a spinner frame) wait up to ``sweep_s``.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal, Protocol

from .clock import Clock, Timer
from .pane import Pane

Mode = Literal["sweep", "change"]


@dataclass(frozen=True)
class Timing:
    mode: Mode = "sweep"
    sweep_s: float = 0.7
    settle_s: float = 0.04
    cap_s: float = 0.15
    change_bytes: int = 256
    feed_budget: int = 16 * 1024
    tick_budget_s: float = 0.02
    high_water: int = 512 * 1024
    low_water: int = 64 * 1024

    @property
    def sweep_interval(self) -> float:
        """Change mode still sweeps (for reports going stale), just less often."""
        return self.sweep_s if self.mode == "sweep" else max(self.sweep_s, 2.0)


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

    def __init__(self, clock: Clock, timing: Timing, flow: Flow,
                 perf: Callable[[], float] = time.perf_counter) -> None:
        self.clock, self.timing, self.flow, self.perf = clock, timing, flow, perf
        self._panes: dict[str, Pane] = {}
        self._feeding: dict[str, Pane] = {}  # insertion-ordered: round-robin
        self._feed_scheduled = False
        self._paused: set[str] = set()
        self._timers: dict[str, Timer] = {}
        self._first_big: dict[str, float] = {}  # change mode: first unread big change
        self._first_small: dict[str, float] = {}  # change mode: first unread small change
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
        self._first_small.pop(key, None)

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
        """Read once output pauses (``settle_s``), no later than ``cap_s`` after a big change;
        a small change waits up to the sweep interval. A dialog is a repaint of hundreds of
        bytes; reading after every 60-byte spinner frame costs ten reads a second for nothing."""
        t, now = self.timing, self.clock.time()
        if self._hot(pane, now):
            first = self._first_big.setdefault(key, now)
            due = min(now + t.settle_s, first + t.cap_s)
        else:
            due = self._first_small.setdefault(key, now) + t.sweep_s
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
        self._first_small.pop(key, None)
        if pane.pending:
            pane.feed_all()
            self.flow.fed(key)
            self.drained(key)
        self.flow.due(key, now)
        pane.unread_bytes = 0
