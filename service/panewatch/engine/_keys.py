"""Keys typed by hand, accounted for without a log line (or an event) per keystroke.

Every input to an agent is logged, but a line per key cost more server CPU than the write itself
(benchmarks/RESULTS.md, "Issue 25: keystrokes"). So a session's typing is summed in bursts: a
burst is logged (bytes, writes, its length, the pane's state, who typed) and told to
``on_burst`` (the engine's ``Acted`` event) one ``window`` after its first key, when a key comes
in another state or from someone else, when the session is removed, and when the server stops.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field

from ..clock import Clock, Timer
from ..states import State
from .models import Actor

log = logging.getLogger("panewatch.engine")

#: Longest a burst of typing waits for its log line (seconds).
WINDOW_S = 1.0

#: The most of a burst's bytes kept to tell (only while the pane is blocked: an answer typed by hand).
KEPT_BYTES = 64

#: Told of every burst once it is summed up (``Burst``: who typed, bytes, writes, the state, ...).
BurstSink = Callable[[str, "Burst"], None]


@dataclass
class Burst:
    """One burst of typing; ``seen`` is what the caller noted when it began (the screen, for a
    blocked pane), ``kept`` its first bytes when blocked (what was answered by hand)."""

    state: State
    actor: Actor
    started: float
    timer: Timer
    seen: object = None
    nbytes: int = 0
    writes: int = 0
    kept: bytearray = field(default_factory=bytearray)


class KeyTally:
    """Per session, the keys typed since its last summary line."""

    def __init__(self, clock: Clock, on_burst: BurstSink, window: float = WINDOW_S) -> None:
        self.clock, self.on_burst, self.window = clock, on_burst, window
        self._open: dict[str, Burst] = {}

    def add(self, sid: str, data: bytes, state: State, actor: Actor, seen: Callable[[], object] | None = None) -> None:
        """``data`` typed into ``sid`` by ``actor`` while its pane was ``state``, and written;
        ``seen`` is asked once, when a burst begins."""
        burst = self._open.get(sid)
        if burst is not None and (burst.state != state or burst.actor != actor):
            self.flush(sid)
            burst = None
        if burst is None:
            now = self.clock.time()
            timer = self.clock.call_at(now + self.window, lambda: self.flush(sid))
            burst = Burst(state, actor, now, timer, seen() if seen is not None else None)
            self._open[sid] = burst
        burst.nbytes += len(data)
        burst.writes += 1
        if state == State.blocked and len(burst.kept) < KEPT_BYTES:
            burst.kept += data[: KEPT_BYTES - len(burst.kept)]

    def flush(self, sid: str) -> None:
        """Log ``sid``'s open burst now, if it has one."""
        burst = self._open.pop(sid, None)
        if burst is None:
            return
        burst.timer.cancel()
        log.info(
            "typed %d bytes by hand in %d writes over %.1f s while %s, by %s",
            burst.nbytes,
            burst.writes,
            self.clock.time() - burst.started,
            burst.state,
            burst.actor,
            extra={"session": sid},
        )
        self.on_burst(sid, burst)

    def flush_all(self) -> None:
        for sid in list(self._open):
            self.flush(sid)
