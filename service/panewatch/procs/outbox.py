"""Bytes for a non-blocking descriptor, written when it can take them: a process's terminal or
its stdin.

Why a queue: a write to an agent that is busy (or stopped) would otherwise block the event loop
or lose the tail of the input; why a limit: an agent that never reads its input must not make
the service hold unbounded memory for it. The pty host and the ACP stdio host share this.
"""

from __future__ import annotations

import asyncio
import errno
import os
from collections.abc import Callable


class Outbox:
    """At most ``limit`` queued bytes for ``fd``; the loop's writer callback drains the rest."""

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        fd: int,
        limit: int,
        on_broken: Callable[[], None] | None = None,
    ) -> None:
        self.loop, self.fd, self.limit = loop, fd, limit
        self._on_broken = on_broken  # the reader went away (EPIPE, EIO): queued bytes are dropped
        self._queue = bytearray()
        self._writing = False
        self.closed = False

    @property
    def queued(self) -> int:
        return len(self._queue)

    def fits(self, n: int) -> bool:
        """Whether ``n`` more bytes stay within the limit (the caller refuses with its own error)."""
        return len(self._queue) + n <= self.limit

    def send(self, data: bytes) -> None:
        """Queue ``data`` and write what the descriptor takes now."""
        self._queue += data
        self.flush()

    def flush(self) -> None:
        while self._queue and not self.closed:
            try:
                n = os.write(self.fd, self._queue)
            except BlockingIOError:
                break
            except OSError as exc:
                if exc.errno == errno.EINTR:
                    continue
                self._queue.clear()
                if self._on_broken is not None:
                    self._on_broken()
                break
            del self._queue[:n]
        if self._queue and not self._writing and not self.closed:
            self.loop.add_writer(self.fd, self.flush)
            self._writing = True
        elif not self._queue and self._writing:
            self._stop_writing()

    def close(self) -> None:
        """Stop writing (before the descriptor is closed); what is queued is dropped."""
        if self._writing:
            self._stop_writing()
        self._queue.clear()
        self.closed = True

    def _stop_writing(self) -> None:
        self.loop.remove_writer(self.fd)
        self._writing = False
