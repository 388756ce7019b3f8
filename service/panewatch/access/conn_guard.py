"""The API port's connections: a deadline for every request head, and a cap on those still waiting.

uvicorn has no header deadline: ``timeout_keep_alive`` runs only between requests and the first
byte of the next one cancels it; ``limit_concurrency`` answers 503 to everyone once reached (the
attacker's connections count, so ``/healthz`` is refused too); ``h11_max_incomplete_event_size``
is h11's, while uvicorn[standard] parses with httptools, which bounds a head's size not at all.
1,100 connections that each sent half a request head held 1,100 descriptors for ever and took
``/healthz`` down under a 1,024 file limit (issue 25).

So ``serve`` runs uvicorn's own httptools protocol with three additions (:func:`guarded_protocol`):

- a connection *waits for a head* from when it opens, or its last answer went out, until its
  request head is complete. Until then nobody knows who it is — the credentials are in the head —
  so these are the unauthenticated connections. Each has ``header_timeout_s`` to send its head:
  then a 408 (it had begun one) or a silent close (it had sent nothing: an idle keep-alive);
- a head larger than ``MAX_HEAD_BYTES`` is a 431;
- at most ``cap`` connections wait at once (:class:`Door`); past that, the ones that have waited
  longest are closed (once they have waited 250 ms: a burst's heads are read first). A browser, curl or a script
  sends its head at once and waits microseconds, so it is never the oldest; what goes is what
  sits on a connection without a request.

A connection with its head in has passed the ``HttpGuard`` (credentials before any body byte)
and is not counted. ``limits`` sizes the cap and the listen backlog from the open-file limit,
which ``raise_file_limit`` lifts to the hard limit first.
"""

from __future__ import annotations

import asyncio
import json
import logging
import resource
from typing import Any, ClassVar

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

log = logging.getLogger("panewatch.http")

#: The largest request head (request line and headers): nginx's default is 4 x 8 KiB.
MAX_HEAD_BYTES = 64 * 1024
#: Most connections ever let wait for a head, and the largest listen backlog.
MAX_WAITING = 1024
MAX_BACKLOG = 2048
#: How long a connection waits for its head before, past the cap, it may be closed (see ``Door``).
TRIM_AFTER_S = 0.25


#: The most ``raise_file_limit`` asks for: agents inherit the limit, and some programs close every
#: descriptor up to it one by one (slow under the 2^30 some container runtimes set as the hard limit).
MAX_FILES = 1 << 20


def raise_file_limit() -> tuple[int, int]:
    """Lift the soft open-file limit to the hard one, up to ``MAX_FILES`` (1,024 is a common soft
    limit, so a few hundred held connections were enough); (before, after). Agents inherit it."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = MAX_FILES if hard == resource.RLIM_INFINITY else min(hard, MAX_FILES)
    if soft == resource.RLIM_INFINITY or soft >= target:
        return soft, soft
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
    except (ValueError, OSError):
        return soft, soft
    return soft, target


def limits(file_limit: int) -> tuple[int, int]:
    """(connections that may wait for a head, listen backlog) under this open-file limit: an
    eighth of it each. asyncio accepts up to a backlog's worth of connections per loop turn and
    closes the ones they push out only on the next, so waiting + two batches must fit with room
    to spare for panes, WebSockets and the report endpoint."""
    share = max(8, file_limit // 8) if file_limit != resource.RLIM_INFINITY else MAX_BACKLOG
    return min(MAX_WAITING, share), min(MAX_BACKLOG, share)


class Door:
    """The connections waiting for a request head, oldest first: past ``cap`` of them, the
    longest waiters are closed, each only once it has waited ``TRIM_AFTER_S``. asyncio accepts a
    whole batch of connections before it reads any, so a burst of requests sent whole (500 at
    once were tried) all wait at first: closing at once the ones past the cap closed every one of
    them, while a moment later their heads have been read and they have left."""

    def __init__(self, cap: int, header_timeout_s: float) -> None:
        self.cap = max(1, cap)
        self.header_timeout_s = header_timeout_s
        self.waiting: dict[GuardedProtocol, float] = {}  # since when, oldest first
        self.evicted = 0  # closed for want of room
        self._trim: asyncio.TimerHandle | None = None

    def wait(self, conn: GuardedProtocol) -> None:
        """``conn`` waits for a head from now on (the newest waiter)."""
        self.waiting.pop(conn, None)
        self.waiting[conn] = conn.loop.time()
        if len(self.waiting) > self.cap and self._trim is None:
            self._trim = conn.loop.call_later(TRIM_AFTER_S, self.trim, conn.loop)

    def trim(self, loop: asyncio.AbstractEventLoop) -> None:
        """Close the longest waiters until ``cap`` are left, or the oldest left is too young
        to go (then again when it is not)."""
        self._trim = None
        while len(self.waiting) > self.cap:
            oldest, since = next(iter(self.waiting.items()))
            if loop.time() - since < TRIM_AFTER_S:
                self._trim = loop.call_at(since + TRIM_AFTER_S, self.trim, loop)
                return
            if self.evicted % 1000 == 0:  # the first, then every thousandth: a sign, not a flood of lines
                log.warning(
                    "more than %d connections waiting for a request head at once: closing the oldest; "
                    "a local process may be holding connections open",
                    self.cap,
                )
            self.leave(oldest)
            self.evicted += 1
            oldest.refuse(503, "too many connections waiting to send a request head", quiet=True)

    def leave(self, conn: GuardedProtocol) -> None:
        self.waiting.pop(conn, None)


class GuardedProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol under a :class:`Door`: see the module's docstring."""

    door: ClassVar[Door]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._deadline: asyncio.TimerHandle | None = None
        self._head_bytes = 0
        self._head_begun = False

    # -- the states: waiting for a head, or not -------------------------------------------
    def _await_head(self) -> None:
        self._head_bytes, self._head_begun = 0, False
        self.door.wait(self)
        if self._deadline is not None:
            self._deadline.cancel()
        self._deadline = self.loop.call_later(self.door.header_timeout_s, self._too_slow)

    def _head_in(self) -> None:
        self.door.leave(self)
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None

    @property
    def _waiting(self) -> bool:
        return self._deadline is not None

    def _too_slow(self) -> None:
        self._deadline = None
        self.door.leave(self)
        self.refuse(408, f"request head not complete within {self.door.header_timeout_s:g} s", quiet=True)

    def refuse(self, status: int, reason: str, *, quiet: bool = False) -> None:
        """Answer ``status`` and close; ``quiet``: close without a word if no head was begun (an
        idle connection that answer would confuse: a client reads it as its next request's)."""
        self._head_in()
        if self.transport is None or self.transport.is_closing():
            return
        if not (quiet and not self._head_begun):
            body = json.dumps({"detail": reason}).encode()
            head = (
                f"HTTP/1.1 {status} {_PHRASES.get(status, '')}\r\ncontent-type: application/json\r\n"
                f"content-length: {len(body)}\r\nconnection: close\r\n\r\n"
            )
            self.transport.write(head.encode() + body)
        self.transport.close()

    # -- uvicorn's callbacks ----------------------------------------------------------------
    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._await_head()

    def data_received(self, data: bytes) -> None:
        if self._waiting:
            self._head_bytes += len(data)
        super().data_received(data)
        if self._waiting and self._head_bytes > MAX_HEAD_BYTES:
            self.refuse(431, f"request head larger than {MAX_HEAD_BYTES} bytes")

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._head_begun = True

    def on_headers_complete(self) -> None:
        self._head_in()  # before a WebSocket upgrade hands the connection to another protocol
        super().on_headers_complete()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if self.timeout_keep_alive_task is not None:  # kept alive, and no pipelined request: idle
            self._await_head()

    def connection_lost(self, exc: Exception | None) -> None:
        self._head_in()
        super().connection_lost(exc)


_PHRASES = {408: "Request Timeout", 431: "Request Header Fields Too Large", 503: "Service Unavailable"}


def guarded_protocol(door: Door) -> type[GuardedProtocol]:
    """The protocol class for ``uvicorn.Config(http=...)``, its connections under ``door``."""
    return type("PanewatchHttpProtocol", (GuardedProtocol,), {"door": door})
