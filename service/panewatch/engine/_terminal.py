"""The dashboard's terminal channel, kept in the engine: each pane's raw output history, the
channels pages have open on it, and the one repaint of a screen read model as terminal bytes.

A channel carries a pane both ways, as an xterm.js widget needs it:

- out (``Channel.messages``): the pane's recent raw output (scrollback from before the page
  connected), then an exact repaint of the emulated screen (colours, cursor, the input modes the
  screen has set), then live output as bytes; dicts for the rest (size, state, the prompt, held
  keys). A client that falls behind is not queued without bound: past ``CLIENT_BACKLOG`` bytes
  its backlog is dropped and it gets a repaint of the latest screen instead.
- in (``Channel.input``): keystrokes exactly as xterm.js encodes them, written through the
  guard (whose held-keys rule holds those typed before the user could have seen a new prompt),
  resizes, and the user's decision about held keys.

The repaint, and another node's pane watched read-only, are in ``_repaint.py``.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import AsyncIterator, Mapping
from typing import Any

from ..errors import PanewatchError, UnknownSession
from ..states import State
from ._context import EngineContext
from ._feed import Feed
from ._guard import Guard, Typing, cursor_line
from ._launch import check_size
from ._repaint import Message, modes_of, repaint
from ._restore import Restorer, info_of
from ._sessions import AnySession
from ._table import Sessions
from ._views import screen_view
from .events import Acted, Action, Created, Deleted, Event, Output, StateChanged
from .models import Actor, ScreenView

log = logging.getLogger("panewatch.terminal")

#: Raw output kept per pane for scrollback (enough for >5,000 lines of a chatty TUI).
HISTORY_BYTES = 4 * 1024 * 1024
#: A client further behind than this is resynchronised from the screen, never queued.
CLIENT_BACKLOG = 512 * 1024
#: Largest input message (a big paste).
INPUT_MAX = 256 * 1024
CHUNK = 64 * 1024
#: Least time between two state/prompt messages to one client.
META_INTERVAL_S = 0.1


class History:
    """A bounded ring of a pane's raw output, as chunks (trimming never copies megabytes)."""

    def __init__(self, limit: int = HISTORY_BYTES, seed: bytes = b"") -> None:
        self.limit = limit
        self.chunks: deque[bytes] = deque()
        self.size = 0
        self.trimmed = False
        if seed:
            self.append(seed)

    def append(self, data: bytes) -> None:
        self.chunks.append(bytes(data))
        self.size += len(data)
        while self.size > self.limit and len(self.chunks) > 1:
            self.size -= len(self.chunks.popleft())
            self.trimmed = True

    def snapshot(self) -> bytes:
        """All kept output; once trimmed, from the first line start (not mid-sequence)."""
        data = b"".join(self.chunks)
        if self.trimmed:
            cut = data.find(b"\n")
            data = data[cut + 1 :] if cut >= 0 else b""
        return data


# --- one page's terminal ---------------------------------------------------------------------


class TermClient:
    """One browser terminal: what is still to be sent to it, bounded."""

    def __init__(self, size: tuple[int, int]) -> None:
        self.items: deque[Message] = deque()
        self.backlog = 0
        self.resync = False
        self.wake = asyncio.Event()
        self.meta_dirty = True
        # output is fed to the screen a loop turn after it arrives: the title it sets is only
        # there then, so an output-driven read is followed by one more, an interval later
        self.meta_trailing = False
        self.size = size
        self.gone = False  # the session was deleted

    def on_output(self, data: bytes) -> None:
        self.meta_dirty = self.meta_trailing = True  # the prompt's selection, the title: read again
        if not self.resync:
            self.items.append(data)
            self.backlog += len(data)
            if self.backlog > CLIENT_BACKLOG:
                self.clear()
                self.resync = True
        self.wake.set()

    def on_meta(self) -> None:
        self.meta_dirty = True  # a state can change without output (a hook's report)
        self.wake.set()

    def on_resize(self, rows: int, cols: int) -> None:
        """The pane was resized: the bytes after this point are drawn at the new size."""
        if (rows, cols) != self.size:
            self.size = (rows, cols)
            self.items.append({"type": "size", "rows": rows, "cols": cols})
            self.wake.set()

    def take(self) -> Message | None:
        """The next message: a control message, or up to ``CHUNK`` bytes of output (what is
        not taken yet still counts against the backlog, so a stuck socket trips the resync)."""
        if not self.items:
            return None
        first = self.items[0]
        if isinstance(first, dict):
            self.items.popleft()
            return first
        out = bytearray()
        while self.items and len(out) < CHUNK:
            item = self.items[0]
            if isinstance(item, dict):
                break
            out += item
            self.items.popleft()
        self.backlog -= len(out)
        return bytes(out)

    def clear(self) -> None:
        self.items.clear()
        self.backlog = 0


class PaneTerm:
    """What the channel keeps per pane: its output history and the clients watching it."""

    def __init__(self, limit: int) -> None:
        self.history = History(limit)
        self.clients: set[TermClient] = set()

    def output(self, data: bytes) -> None:
        self.history.append(data)
        for client in list(self.clients):
            client.on_output(data)


class Terminals:
    """Every pane's ``PaneTerm``, kept from its first byte by a synchronous hub listener (the
    parts are built before any session starts, and ``Created`` comes before a host's first read)."""

    def __init__(
        self, ctx: EngineContext, table: Sessions, feed: Feed, guard: Guard, restorer: Restorer | None
    ) -> None:
        self.ctx, self.table, self.feed, self.guard, self.restorer = ctx, table, feed, guard, restorer
        self.limit = HISTORY_BYTES
        self.panes: dict[str, PaneTerm] = {}
        self._unlisten = ctx.hub.listen(self.on_event)

    def close(self) -> None:
        """The engine stops: no more output is kept (the server closes the sockets itself; a
        channel ended here would tell its page the session is gone, and the page would stop)."""
        self._unlisten()

    def on_event(self, event: Event) -> None:
        if isinstance(event, Output):
            self.pane(event.session).output(event.data)  # (a pane adopted before: from now on)
        elif isinstance(event, StateChanged) and event.session in self.panes:
            for client in list(self.panes[event.session].clients):
                client.on_meta()
        elif isinstance(event, Created):
            self.pane(event.session.id)
        elif isinstance(event, Deleted):
            self._end(event.session)

    def _end(self, sid: str) -> None:
        for client in self.panes.pop(sid, PaneTerm(0)).clients:
            client.gone = True  # its next turn finds the session gone: the channel ends
            client.wake.set()

    def pane(self, sid: str) -> PaneTerm:
        return self.panes.setdefault(sid, PaneTerm(self.limit))

    def session(self, sid: str, why: str = "no session {sid!r}") -> AnySession:
        found = self.table.get(sid)
        if found is None:
            raise UnknownSession(why.format(sid=sid))
        return found

    def open(self, sid: str, actor: Actor) -> Channel:
        """A page's terminal on a session of this node (``UnknownSession``: there is none)."""
        return Channel(self, self.session(sid), actor)

    def view(self, session: AnySession) -> ScreenView:
        """The screen with its styles, read fresh: every byte received so far is on it."""
        self.feed.classify(session)
        return screen_view(session, self.ctx.store, styles=True)

    def resize(self, session: AnySession, rows: int, cols: int, actor: Actor) -> None:
        """A new size (``InvalidRequest`` for a bad one); every page on the pane is told."""
        check_size(rows, cols)
        self.feed.resize(session, rows, cols)
        self.ctx.hub.publish(Acted(session.id, Action.resize, actor, f"{rows}x{cols}"))
        for client in list(self.pane(session.id).clients):
            client.on_resize(rows, cols)

    def meta(self, sid: str) -> dict[str, Any]:
        """State, title and the prompt the server decided. The screen (which feeds pending
        output) is read only while blocked, for the prompt."""
        session = self.session(sid, "session {sid!r} was deleted")
        info = info_of(session, self.restorer)
        prompt = None
        if info.state == State.blocked:
            found = self.view(session).prompt  # read fresh: the state may have moved on
            prompt = found.model_dump(mode="json") if found else None
            info = info_of(session, self.restorer)
        return {
            "type": "state",
            "state": str(info.state),
            "rule": info.rule,
            "source": str(info.source),
            "why": info.why,
            "since": info.since,
            "title": info.title,
            "prompt": prompt,
            "request": info.request.model_dump(mode="json") if info.request else None,
            "exit_code": info.exit_code,
            "rows": info.rows,
            "cols": info.cols,
        }


class Channel:
    """One page's terminal on one session of this node: its history and repaint, taken at
    once when it opens (in one loop turn: history + repaint + what follows is seamless), then
    its live output and state; its keys, held back or typed through the guard."""

    def __init__(self, terms: Terminals, session: AnySession, actor: Actor) -> None:
        self.terms, self.sid, self.actor = terms, session.id, actor
        view = terms.view(session)
        self.pane = terms.pane(self.sid)
        self._past = self.pane.history.snapshot()
        self._first = repaint(view, *modes_of(session))
        self.client = TermClient((view.size.rows, view.size.cols))
        self.typing = Typing()
        self.pane.clients.add(self.client)

    async def messages(self) -> AsyncIterator[Message]:
        """History, the repaint, ``ready``, then output and (at most every META_INTERVAL_S)
        state; ``UnknownSession`` once the session is deleted."""
        rows, cols = self.client.size
        past, self._past = self._past, b""
        yield {"type": "hello", "rows": rows, "cols": cols, "history_bytes": len(past)}
        for i in range(0, len(past), CHUNK):
            yield past[i : i + CHUNK]
        yield self._first
        yield {"type": "ready"}
        async for item in self._live():
            yield item

    async def _live(self) -> AsyncIterator[Message]:
        client, clock = self.client, self.terms.ctx.clock
        last_meta: dict[str, Any] | None = None
        meta_at = float("-inf")
        while True:
            if client.gone:
                raise UnknownSession(f"session {self.sid!r} was deleted")
            if client.meta_dirty and clock.time() >= meta_at + META_INTERVAL_S:
                client.meta_dirty, client.meta_trailing = client.meta_trailing, False
                meta = self.terms.meta(self.sid)
                client.on_resize(meta["rows"], meta["cols"])  # a resize through the HTTP API
                if meta != last_meta:
                    yield meta
                    last_meta = meta
                meta_at = clock.time()
            if client.resync:
                for message in self._resync():
                    yield message
            item = client.take()
            if item:
                yield item
            if client.items or client.resync or client.gone:
                continue
            client.wake.clear()
            timer = None
            if client.meta_dirty:  # the next state message falls due on the engine's clock
                if clock.time() >= meta_at + META_INTERVAL_S:
                    continue
                timer = clock.call_at(meta_at + META_INTERVAL_S, client.wake.set)
            try:
                await client.wake.wait()
            finally:
                if timer is not None:
                    timer.cancel()

    def _resync(self) -> list[Message]:
        client = self.client
        client.resync = False
        client.clear()
        session = self.terms.session(self.sid, "session {sid!r} was deleted")
        fresh = self.terms.view(session)
        rows, cols = client.size = (fresh.size.rows, fresh.size.cols)
        log.info("a slow terminal client was resynchronised from the screen", extra={"session": self.sid})
        return [{"type": "size", "rows": rows, "cols": cols, "resync": True}, repaint(fresh, *modes_of(session))]

    async def input(self, message: Mapping[str, Any]) -> dict[str, Any] | None:
        """One message from the page; the reply to send, if any (a refusal says why).
        ``UnknownSession`` once the session is gone."""
        kind = message.get("type")
        try:
            if kind == "input":
                return self._keys(message.get("data"))
            if kind == "release":
                return self._release(send=message.get("send") is True)
            if kind == "resize":
                return self._resize(message.get("rows"), message.get("cols"))
        except UnknownSession:
            raise
        except PanewatchError as exc:  # exited, not reading its input, a bad size
            return {"type": "error", "detail": str(exc)}
        return {"type": "error", "detail": f"unknown message type {kind!r}"}

    def _keys(self, data: object) -> dict[str, Any] | None:
        if not isinstance(data, str) or not data or len(data) > INPUT_MAX:
            return {"type": "error", "detail": "input: a non-empty string of at most 256 KiB"}
        typing = self.typing
        if typing.held:
            if sum(map(len, typing.held)) + len(data) > INPUT_MAX:
                return {"type": "error", "detail": "too many keys held back: send or drop them first"}
            typing.held.append(data)
            return {"type": "held", "bytes": sum(map(len, typing.held))}
        session = self.terms.session(self.sid)
        if self.terms.guard.hold(session, typing, self.terms.ctx.wall()):
            typing.held.append(data)
            decision = session.decision
            age = self.terms.ctx.wall() - decision.since
            log.info(
                "held back %d key bytes typed %.2fs after the pane turned blocked (%s)",
                len(data),
                age,
                decision.decided_by,
                extra={"session": self.sid},
            )
            return {"type": "held", "bytes": len(data), "rule": decision.decided_by}
        typing.at = cursor_line(session)
        self.terms.guard.type_keys(session, data.encode("utf-8", "surrogatepass"), self.actor)  # logged per burst
        return None

    def _release(self, *, send: bool) -> dict[str, Any]:
        held, self.typing.held = "".join(self.typing.held), []
        if not held:
            return {"type": "released", "sent": False, "bytes": 0}
        if send:
            log.info("sending %d held-back key bytes on the user's word", len(held), extra={"session": self.sid})
            session = self.terms.session(self.sid)
            self.terms.guard.type_keys(session, held.encode("utf-8", "surrogatepass"), self.actor)
            return {"type": "released", "sent": True, "bytes": len(held)}
        log.info("dropped %d held-back key bytes on the user's word", len(held), extra={"session": self.sid})
        return {"type": "released", "sent": False, "bytes": len(held)}

    def _resize(self, rows: object, cols: object) -> dict[str, Any] | None:
        if not (isinstance(rows, int) and isinstance(cols, int)):
            return {"type": "error", "detail": "resize: rows and cols are integers"}
        session = self.terms.session(self.sid)
        if (rows, cols) != session.size:
            self.terms.resize(session, rows, cols, self.actor)  # a bad size: the reply says why
            # a page resizes as its window is dragged: a line each is noise at info
            log.debug("resized to %dx%d from the page", rows, cols, extra={"session": self.sid})
        return None

    def close(self) -> None:
        """The page went away: it gets nothing more; keys it still held are dropped."""
        self.pane.clients.discard(self.client)
        if self.typing.held:
            dropped = sum(map(len, self.typing.held))
            self.typing.held = []
            log.info("dropped %d held-back key bytes: the page went away", dropped, extra={"session": self.sid})
