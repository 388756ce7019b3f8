"""Typed engine events and the hub that fans them out.

One stream, many sinks (as asciinema does it): the WebSocket API, notifications, recordings,
the lab and the benchmark subscribe here instead of patching the engine's methods.

Two ways to listen:

- ``hub.listen(fn)``: called synchronously, in order, for every event (output bytes included)
  on the event loop; for in-process sinks that must see every byte (a recording, a tap);
- ``hub.stream(snapshot)``: an async iterator of the state-level events (created, deleted,
  state changed, notification; not output bytes, raw reports or an agent's every desktop
  notification) with a bounded mailbox; a consumer that falls behind is not given a growing
  queue but, once, a fresh ``Snapshot`` from which to start over.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from collections.abc import AsyncIterator, Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from .states import State

log = logging.getLogger("panewatch.events")


@dataclass(frozen=True)
class Created:
    session: dict[str, Any]  # the new session's info
    type = "created"

    def as_dict(self) -> dict[str, Any]:
        return {"type": self.type, "session": self.session}


@dataclass(frozen=True)
class Deleted:
    session: str
    exit_code: int | None = None
    type = "deleted"

    def as_dict(self) -> dict[str, Any]:
        return {"type": self.type, "session": self.session}


@dataclass(frozen=True)
class StateChanged:
    session: str
    state: State
    prev: State | None
    source: str
    rule: str | None  # the decider as one string (``Decision.decided_by``)
    why: str
    at: float  # wall clock
    exit_code: int | None = None
    error: str | None = None
    type = "state"

    def as_dict(self) -> dict[str, Any]:
        out = {"type": self.type, **asdict(self)}
        if self.state not in (State.exited, State.lost):
            del out["exit_code"], out["error"]
        return out


@dataclass(frozen=True)
class Output:
    """Bytes a pane's agent wrote, as the host delivered them (never queued for streams)."""

    session: str
    data: bytes
    type = "output"

    def as_dict(self) -> dict[str, Any]:
        return {"type": self.type, "session": self.session, "bytes": len(self.data)}


@dataclass(frozen=True)
class Reported:
    """A report (hook payload or ``{"state": ...}``) arrived; ``state`` None: ignored."""

    session: str
    payload: dict[str, Any]
    state: State | None
    event: str | None
    type = "report"

    def as_dict(self) -> dict[str, Any]:
        return {"type": self.type, "session": self.session, "state": self.state, "event": self.event}


@dataclass(frozen=True)
class Desktop:
    """The agent raised a desktop notification (OSC 9, 99 or 777), text cleaned; every one,
    for in-process sinks. What reaches clients is the notifier's bounded ``Notified``."""

    session: str
    protocol: str  # osc9, osc99, osc777
    title: str
    body: str
    at: float  # wall clock
    source = "oob"
    type = "desktop"

    def as_dict(self) -> dict[str, Any]:
        return {"type": self.type, "source": self.source, **asdict(self)}


@dataclass(frozen=True)
class Notified:
    """A notification went out (see ``notify.Notification`` for the fields)."""

    notification: dict[str, Any]
    type = "notification"

    def as_dict(self) -> dict[str, Any]:
        return {"type": self.type, **self.notification}


@dataclass(frozen=True)
class Snapshot:
    """Every session now: the first item of a stream, and what a lagging stream restarts from."""

    sessions: list[dict[str, Any]]
    at: float = field(default_factory=time.time)
    type = "snapshot"

    def as_dict(self) -> dict[str, Any]:
        return {"type": self.type, "sessions": self.sessions, "at": self.at}


@dataclass(frozen=True)
class Ping:
    at: float = field(default_factory=time.time)
    type = "ping"

    def as_dict(self) -> dict[str, Any]:
        return {"type": self.type, "at": self.at}


Event = Created | Deleted | StateChanged | Output | Reported | Desktop | Notified
Listener = Callable[[Event], None]


class EventStream:
    """An async iterator over one subscriber's events: a snapshot first, then each event; a
    ``Ping`` after ``heartbeat`` seconds of silence; a new snapshot after falling behind."""

    def __init__(self, hub: EventHub, snapshot: Callable[[], Snapshot], size: int, heartbeat: float | None) -> None:
        self._hub, self._snapshot, self._size, self._heartbeat = hub, snapshot, size, heartbeat
        self._queue: deque[Event] = deque()
        self._ready = asyncio.Event()
        self._resync = True  # the first item is a snapshot
        self.resyncs = 0

    def put(self, event: Event) -> None:
        if len(self._queue) >= self._size:
            self._queue.clear()
            self._resync = True
            self.resyncs += 1
        else:
            self._queue.append(event)
        self._ready.set()

    def __aiter__(self) -> AsyncIterator[Event | Snapshot | Ping]:
        return self

    async def __anext__(self) -> Event | Snapshot | Ping:
        while True:
            if self._resync:
                self._resync = False
                self._queue.clear()
                return self._snapshot()
            if self._queue:
                return self._queue.popleft()
            self._ready.clear()
            try:  # (``timeout`` rather than ``wait_for``: no task of its own per event waited for)
                async with asyncio.timeout(self._heartbeat):
                    await self._ready.wait()
            except TimeoutError:
                return Ping()

    def close(self) -> None:
        self._hub._streams.discard(self)


class EventHub:
    """Fan-out of engine events to listeners and streams."""

    def __init__(self) -> None:
        self._listeners: list[Listener] = []
        self._streams: set[EventStream] = set()

    def listen(self, fn: Listener) -> Callable[[], None]:
        """Call ``fn`` for every event; returns the function that stops it."""
        self._listeners.append(fn)
        return lambda: self._listeners.remove(fn) if fn in self._listeners else None

    def stream(
        self, snapshot: Callable[[], Snapshot], *, size: int = 1000, heartbeat: float | None = 15.0
    ) -> EventStream:
        stream = EventStream(self, snapshot, size, heartbeat)
        self._streams.add(stream)
        return stream

    def publish(self, event: Event) -> None:
        for fn in list(self._listeners):
            try:
                fn(event)
            except Exception:  # a broken sink must not stop the engine or the other sinks
                log.exception("event listener %r failed on %s", fn, event.type)
        if isinstance(event, (Output, Reported, Desktop)):
            return  # per-byte, per-hook and per-OSC detail is for in-process sinks, not client streams
        for stream in list(self._streams):
            stream.put(event)
