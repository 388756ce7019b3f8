"""An agent as a child on three pipes, driven from the event loop (ACP's stdio transport).

Like the PTY child: non-blocking reads with the loop's reader callbacks, writes queued behind
a writer callback up to a limit, the exit seen through a pidfd (a grandchild holding stdout
open must not hide the agent's own exit), and the child in its own process group so that
``terminate`` ends everything it started. stdout is the protocol; stderr is kept as a tail
for the exit reason.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
from collections.abc import Callable, Mapping, Sequence

from ..procs.outbox import Outbox
from ..procs.proctree import exits_within, release_pidfd

READ_SIZE = 256 * 1024
#: Most bytes queued for an agent that is not reading its stdin before writes are refused.
WRITE_QUEUE_LIMIT = 8 * 1024 * 1024
STDERR_TAIL = 8 * 1024


class StdioSpawnError(Exception):
    """The command could not be started (not found, not executable, bad folder)."""


class StdioWriteRefused(Exception):
    """The agent is gone, or has stopped reading and too much is already queued."""


class StdioChild:
    """``on_stdout(bytes)`` per chunk, ``on_stdout_eof()`` once, ``on_exit(code)`` once the
    child itself has exited and been reaped (negative: killed by that signal)."""

    def __init__(
        self,
        argv: Sequence[str],
        *,
        cwd: str | None,
        env: Mapping[str, str] | None,
        on_stdout: Callable[[bytes], None],
        on_stdout_eof: Callable[[], None],
        on_exit: Callable[[int], None],
        loop: asyncio.AbstractEventLoop | None = None,
    ) -> None:
        self.loop = loop or asyncio.get_running_loop()
        self._on_stdout = on_stdout
        self._on_stdout_eof = on_stdout_eof
        self._on_exit = on_exit
        self.returncode: int | None = None
        self.stderr_tail = bytearray()
        try:
            self._proc = subprocess.Popen(
                list(argv),
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                cwd=cwd,
                env=dict(env) if env is not None else None,
                start_new_session=True,
                close_fds=True,
            )
        except (OSError, subprocess.SubprocessError) as exc:
            raise StdioSpawnError(f"cannot start {argv[0]!r}: {getattr(exc, 'strerror', None) or exc}") from None
        assert self._proc.stdin and self._proc.stdout and self._proc.stderr
        self.pid = self._proc.pid
        self._in = self._proc.stdin.fileno()
        self._out = self._proc.stdout.fileno()
        self._err = self._proc.stderr.fileno()
        for fd in (self._in, self._out, self._err):
            os.set_blocking(fd, False)
        self._open = {self._in, self._out, self._err}
        # EPIPE: the agent closed its stdin, so it is closed here too
        self._outbox = Outbox(self.loop, self._in, WRITE_QUEUE_LIMIT, lambda: self._close_fd(self._in))
        self.loop.add_reader(self._out, self._read_out)
        self.loop.add_reader(self._err, self._read_err)
        self._pidfd = os.pidfd_open(self.pid)
        self.loop.add_reader(self._pidfd, self._on_pidfd)

    @property
    def alive(self) -> bool:
        return self.returncode is None

    # -- reading ---------------------------------------------------------------------------
    def _read(self, fd: int) -> bytes | None:
        """One chunk; b'' at EOF; None when nothing is there right now."""
        try:
            return os.read(fd, READ_SIZE)
        except BlockingIOError:
            return None
        except OSError:
            return b""

    def _read_out(self) -> None:
        data = self._read(self._out)
        if data is None:
            return
        if not data:
            self._close_fd(self._out)
            self._on_stdout_eof()
            return
        self._on_stdout(data)

    def _read_err(self) -> None:
        data = self._read(self._err)
        if data is None:
            return
        if not data:
            self._close_fd(self._err)
            return
        self.stderr_tail += data
        if len(self.stderr_tail) > STDERR_TAIL:
            del self.stderr_tail[: len(self.stderr_tail) - STDERR_TAIL]

    def stderr_text(self, max_chars: int = 2000) -> str:
        return self.stderr_tail.decode("utf-8", "replace")[-max_chars:]

    # -- exit ------------------------------------------------------------------------------
    def _on_pidfd(self) -> None:
        code = self._proc.poll()
        if code is None:
            return
        self._pidfd = release_pidfd(self.loop, self._pidfd, self._proc)  # exited: nothing to reap
        self.returncode = code
        # what the child wrote just before exiting is read before its exit is reported
        for _ in range(64):
            if self._out not in self._open:
                break
            self._read_out()
        for _ in range(8):
            if self._err not in self._open:
                break
            self._read_err()
        self._on_exit(code)

    # -- writing ---------------------------------------------------------------------------
    def write(self, data: bytes) -> None:
        if self._in not in self._open or not self.alive:
            raise StdioWriteRefused("the agent has exited")
        if not self._outbox.fits(len(data)):
            raise StdioWriteRefused(f"the agent is not reading its input ({self._outbox.queued} bytes queued)")
        self._outbox.send(data)

    # -- control ---------------------------------------------------------------------------
    def signal(self, sig: int) -> None:
        """Send ``sig`` to the agent's process group (it and everything it started)."""
        try:
            os.killpg(self.pid, sig)
        except (ProcessLookupError, PermissionError):
            pass

    async def terminate(self, grace: float = 2.0) -> int | None:
        """Close stdin (a well-behaved agent exits on EOF), SIGTERM, then SIGKILL after
        ``grace``; the whole process group goes. Returns the exit code."""
        if self.alive:
            self._close_fd(self._in)
            self.signal(signal.SIGTERM)
            if not await exits_within(lambda: self.alive, grace):
                self.signal(signal.SIGKILL)
                await exits_within(lambda: self.alive, None)
        self.signal(signal.SIGKILL)  # stragglers of the group (the agent's own children)
        return self.returncode

    def _close_fd(self, fd: int) -> None:
        if fd not in self._open:
            return
        self._open.discard(fd)
        if fd == self._in:
            self._outbox.close()
            self._proc.stdin.close()  # type: ignore[union-attr]
        else:
            self.loop.remove_reader(fd)
            (self._proc.stdout if fd == self._out else self._proc.stderr).close()  # type: ignore[union-attr]

    def close(self) -> None:
        """Release the pipes and the pidfd (after exit, or leaving the child to be reaped)."""
        for fd in list(self._open):
            self._close_fd(fd)
        if self._pidfd >= 0:
            self._pidfd = release_pidfd(self.loop, self._pidfd, self._proc)
