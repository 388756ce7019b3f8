"""Typed engine events and the hub that fans them out.

One stream, many sinks (as asciinema does it): the WebSocket API, notifications, recordings,
the lab and the benchmark subscribe here instead of patching the engine's methods.

Two ways to listen:

- ``hub.listen(fn)``: called synchronously, in order, for every event (output bytes included)
  on the event loop; for in-process sinks that must see every byte (a recording, a tap);
- ``hub.stream(snapshot)``: an async iterator of the state-level events (created, deleted,
  state changed, notification; not output bytes, raw reports, an agent's every desktop
  notification or who wrote what) with a bounded mailbox; a consumer that falls behind is not given a growing
  queue but, once, a fresh ``Snapshot`` from which to start over.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from collections.abc import AsyncIterator, Callable
from dataclasses import asdict, dataclass, field
from enum import StrEnum
from typing import Any

from ..states import Source, State
from .models import Actor, RequestView, SessionInfo

__all__ = [
    "SEEN_LINES",
    "SEEN_LINE_CHARS",
    "Acted",
    "Action",
    "Created",
    "Deleted",
    "Desktop",
    "Event",
    "EventHub",
    "EventStream",
    "Listener",
    "Notified",
    "Output",
    "Ping",
    "PolicyDecided",
    "Renamed",
    "Reported",
    "Snapshot",
    "StateChanged",
    "seen_lines",
]

log = logging.getLogger("panewatch.events")


@dataclass(frozen=True)
class Created:
    session: SessionInfo  # the new session's info
    actor: Actor | None = None  # who created it (None: another node's session, seen here)
    restored: bool = False  # brought back from the registry at start (no one decided it now)
    type = "created"

    def as_dict(self) -> dict[str, Any]:
        return {"type": self.type, "session": self.session.model_dump(mode="json")}


@dataclass(frozen=True)
class Renamed:
    """A session's new name, with its whole record (the page updates the row in place)."""

    session: SessionInfo
    actor: Actor | None = None  # who renamed it (None: another node's session, seen here)
    type = "renamed"

    def as_dict(self) -> dict[str, Any]:
        return {"type": self.type, "session": self.session.model_dump(mode="json")}


@dataclass(frozen=True)
class Deleted:
    session: str
    exit_code: int | None = None
    actor: Actor | None = None  # who deleted it (None: another node's session, seen here)
    type = "deleted"

    def as_dict(self) -> dict[str, Any]:
        return {"type": self.type, "session": self.session}


@dataclass(frozen=True)
class StateChanged:
    session: str
    state: State
    prev: State | None
    source: Source
    rule: str | None  # the decider as one string (``Decision.decided_by``)
    why: str
    at: float  # wall clock
    exit_code: int | None = None
    error: str | None = None
    request: RequestView | None = None  # what a blocked session asks
    type = "state"

    def as_dict(self) -> dict[str, Any]:
        out = {"type": self.type, **asdict(self)}
        if self.state not in (State.exited, State.lost):
            del out["exit_code"], out["error"]
        if self.state != State.blocked:
            del out["request"]
        elif self.request is not None:
            out["request"] = self.request.model_dump(mode="json")
        return out


class Action(StrEnum):
    """The writes that an ``Acted`` event records (create and delete have their own events)."""

    send = "send"
    answer = "answer"
    keys = "keys"
    resize = "resize"
    resume = "resume"
    cancel = "cancel"
    worktree_added = "worktree_added"
    worktree_removed = "worktree_removed"


#: What a write's event keeps of the screen the actor saw: its last lines, each cut.
SEEN_LINES = 40
SEEN_LINE_CHARS = 400


def seen_lines(lines: list[str]) -> tuple[str, ...]:
    """The screen as an actor saw it, bounded: the last ``SEEN_LINES`` rows up to the last
    non-blank one, each at most ``SEEN_LINE_CHARS`` characters (a ledger row stays small)."""
    end = len(lines)
    while end and not lines[end - 1].strip():
        end -= 1
    return tuple(line.rstrip()[:SEEN_LINE_CHARS] for line in lines[max(0, end - SEEN_LINES) : end])


@dataclass(frozen=True)
class Acted:
    """Someone wrote to a session, or tried to and was refused (``refused`` says why): for
    in-process sinks (the approval ledger), not client streams. It carries what the ledger
    keeps of the decision: what the pane asked and showed, what was written, whether it took."""

    session: str
    action: Action
    actor: Actor
    detail: str = ""  # what, in short
    agent: str | None = None
    state: State | None = None  # the pane's state as read right before the write
    request: RequestView | None = None  # what the blocked pane asked, as the actor was shown it
    option: int | str | None = None  # the option answered
    keys: str | None = None  # the keys written (an answer's, or typed while blocked)
    took: bool | None = None  # an answer: verified to have taken (None: not a checked write)
    refused: str | None = None  # the write was refused, and why (nothing was written)
    screen: tuple[str, ...] = ()  # the screen as the actor saw it (``seen_lines``)
    type = "acted"

    def as_dict(self) -> dict[str, Any]:
        return {
            "type": self.type,
            **asdict(self),
            "action": str(self.action),
            "actor": self.actor.model_dump(mode="json"),
            "request": None if self.request is None else self.request.model_dump(mode="json"),
            "screen": list(self.screen),
        }


@dataclass(frozen=True)
class PolicyDecided:
    """The approval policy decided on a blocked session's request (every decision, ``ask`` and
    ``suggest`` too, so the ledger and the page can say "the policy would allow this").
    ``rule`` None: no rule matched. An ``allow`` or ``deny`` is then answered as an ``Acted``
    whose actor is the rule."""

    session: str
    rule: str | None
    action: str  # allow | deny | ask | suggest
    reason: str
    request: RequestView | None
    at: float  # wall clock
    would: str | None = None  # allow | deny: what the rule would have done where it did not act
    type = "policy"

    def as_dict(self) -> dict[str, Any]:
        return {
            "type": self.type,
            "session": self.session,
            "rule": self.rule,
            "action": self.action,
            "reason": self.reason,
            "request": self.request.model_dump(mode="json") if self.request else None,
            "at": self.at,
            "would": self.would,
        }


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

    sessions: list[SessionInfo]
    at: float = field(default_factory=time.time)
    type = "snapshot"

    def as_dict(self) -> dict[str, Any]:
        return {"type": self.type, "sessions": [s.model_dump(mode="json") for s in self.sessions], "at": self.at}


@dataclass(frozen=True)
class Ping:
    at: float = field(default_factory=time.time)
    type = "ping"

    def as_dict(self) -> dict[str, Any]:
        return {"type": self.type, "at": self.at}


Event = Created | Renamed | Deleted | StateChanged | Output | Reported | Desktop | Notified | Acted | PolicyDecided
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

    def resync(self) -> None:
        """Send a fresh snapshot next (what this subscriber may see changed: the API's users)."""
        self._resync = True
        self._ready.set()

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
        if isinstance(event, (Output, Reported, Desktop, Acted)):
            return  # per-byte, per-hook, per-OSC and per-write detail is for in-process sinks, not client streams
        for stream in list(self._streams):
            stream.put(event)
