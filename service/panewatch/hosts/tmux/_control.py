"""The one ``tmux -C`` control client: commands out, replies and notifications in, one ordered
stream."""

from __future__ import annotations

import asyncio
import collections
import logging
import os
import subprocess
from collections.abc import Callable, Sequence

from ._protocol import TmuxError, unescape

log = logging.getLogger("panewatch.hosts.tmux")

# --- the control client -------------------------------------------------------------------


class CommandFailed(TmuxError):
    """tmux answered a command with ``%error``."""


Reply = Callable[[list[bytes] | None, str | None], None]


class ControlClient:
    """One ``tmux -C`` process: commands out, replies and notifications in, one ordered stream.

    Reply callbacks run synchronously while the stream is parsed, so a caller knows exactly
    which ``%output`` lines came before and after its command (screen seeding relies on it).
    """

    def __init__(
        self,
        argv: Sequence[str],
        env: dict[str, str],
        *,
        on_output: Callable[[str, bytes], None],
        on_notice: Callable[[str, list[str]], None],
        on_close: Callable[[], None],
    ) -> None:
        self.argv = list(argv)
        self.env = env
        self._on_output = on_output
        self._on_notice = on_notice
        self._on_close = on_close
        self._proc: subprocess.Popen[bytes] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._pending: collections.deque[Reply] = collections.deque()
        self._block: list[bytes] | None = None
        self._block_ours = False
        self._partial = b""
        self._out = bytearray()  # commands not yet taken by the pipe
        self._writing = False
        self._ready: asyncio.Future[None] | None = None
        self._eof: asyncio.Future[None] | None = None
        self.closed = False

    async def start(self) -> None:
        """Start ``tmux -C`` and wait until it is attached. Its pipes are read and written with
        the loop's fd callbacks (cheaper than a stream task: one read per wake-up, no futures)."""
        self._loop = loop = asyncio.get_running_loop()
        try:
            self._proc = await asyncio.to_thread(  # the fork and exec off the loop
                subprocess.Popen,
                self.argv,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                env=self.env,
                start_new_session=True,
            )
        except OSError as exc:
            raise TmuxError(f"cannot run {self.argv[0]}: {exc.strerror or exc}") from None
        assert self._proc.stdout is not None and self._proc.stdin is not None
        os.set_blocking(self._proc.stdout.fileno(), False)
        os.set_blocking(self._proc.stdin.fileno(), False)
        self._ready = loop.create_future()
        self._eof = loop.create_future()
        loop.add_reader(self._proc.stdout.fileno(), self._on_readable)
        # commands sent before the attach itself has finished fail ("no current client")
        try:
            await asyncio.wait_for(asyncio.shield(self._ready), 10.0)
        except TimeoutError:
            raise TmuxError("the tmux control client did not attach within 10 s") from None

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc else None

    @property
    def queued(self) -> int:
        return len(self._out)

    def send(self, line: str, reply: Reply | None = None) -> None:
        """Send one command (exactly one: a ``;`` list would give several replies, fewer on error)."""
        if self.closed or self._proc is None:
            raise TmuxError("the tmux control client is gone")
        assert "\n" not in line
        self._pending.append(reply or _ignore_reply)
        self._out += line.encode("utf-8", "surrogateescape") + b"\n"
        self._flush()

    def _flush(self) -> None:
        assert self._proc is not None and self._proc.stdin is not None and self._loop is not None
        fd = self._proc.stdin.fileno()
        while self._out:
            try:
                n = os.write(fd, self._out)
            except BlockingIOError:
                break
            except OSError:  # the client is gone; its EOF on stdout says so
                self._out.clear()
                break
            del self._out[:n]
        if self._out and not self._writing:
            self._loop.add_writer(fd, self._flush)
            self._writing = True
        elif not self._out and self._writing:
            self._loop.remove_writer(fd)
            self._writing = False

    def command(self, line: str) -> asyncio.Future[list[bytes]]:
        """Send a command; the future has its output lines, or ``CommandFailed``."""
        fut: asyncio.Future[list[bytes]] = asyncio.get_running_loop().create_future()

        def done(lines: list[bytes] | None, error: str | None) -> None:
            if fut.done():
                return
            if error is not None:
                fut.set_exception(CommandFailed(error))
            else:
                fut.set_result(lines or [])

        self.send(line, done)
        return fut

    def _on_readable(self) -> None:
        assert self._proc is not None and self._proc.stdout is not None
        try:
            chunk = os.read(self._proc.stdout.fileno(), 65536)
        except BlockingIOError:
            return
        except OSError:
            chunk = b""
        if not chunk:
            self._closed()
            return
        try:
            self._feed(chunk)
        except Exception:  # a parsing bug must not leave panes silently frozen
            log.exception("tmux control stream failed")
            self._closed()

    def _feed(self, chunk: bytes) -> None:
        data = self._partial + chunk
        lines = data.split(b"\n")
        self._partial = lines.pop()
        for line in lines:
            self._line(line)

    def _line(self, line: bytes) -> None:
        if self._block is not None:
            if line.startswith((b"%end ", b"%error ")):
                words = line.split(b" ")
                if len(words) == 4:
                    lines, self._block = self._block, None
                    ready = self._ready
                    if ready is not None and not ready.done():  # the attach's own reply comes first
                        if words[0] == b"%end":
                            ready.set_result(None)
                        else:
                            ready.set_exception(
                                TmuxError(
                                    "tmux refused the control client: " + b" ".join(lines).decode("utf-8", "replace")
                                )
                            )
                    elif self._block_ours:
                        reply = self._pending.popleft() if self._pending else _ignore_reply
                        error = None if words[0] == b"%end" else b" ".join(lines).decode("utf-8", "replace")
                        reply(None if error is not None else lines, error)
                    return
            self._block.append(line)
            return
        if line.startswith(b"%output "):
            _, pane, data = line.split(b" ", 2) if line.count(b" ") >= 2 else (b"", b"", b"")
            self._on_output(pane.decode(), unescape(data))
        elif line.startswith(b"%extended-output "):
            head, _, data = line.partition(b" : ")
            self._on_output(head.split(b" ")[1].decode(), unescape(data))
        elif line.startswith(b"%begin "):
            words = line.split(b" ")
            self._block = []
            self._block_ours = len(words) == 4 and int(words[3] or b"0") & 1 == 1
        elif line.startswith(b"%"):
            notice = line.decode("utf-8", "replace").split(" ")
            self._on_notice(notice[0], notice[1:])

    def _closed(self) -> None:
        if self.closed:
            return
        self.closed = True
        if self._proc is not None and self._loop is not None:
            assert self._proc.stdout is not None and self._proc.stdin is not None
            self._loop.remove_reader(self._proc.stdout.fileno())
            if self._writing:
                self._loop.remove_writer(self._proc.stdin.fileno())
                self._writing = False
        if self._ready is not None and not self._ready.done():
            self._ready.set_exception(TmuxError("the tmux control client exited before attaching"))
        if self._eof is not None and not self._eof.done():
            self._eof.set_result(None)
        while self._pending:
            self._pending.popleft()(None, "the tmux control client is gone")
        self._on_close()

    async def stop(self) -> None:
        """Detach (closing stdin ends the client); the tmux server and its panes stay."""
        proc = self._proc
        if proc is None:
            return
        if self._eof is not None and not self._eof.done():
            if proc.stdin is not None:
                try:
                    proc.stdin.close()
                except OSError:
                    pass
            try:
                await asyncio.wait_for(asyncio.shield(self._eof), 2.0)
            except TimeoutError:
                proc.kill()
        self._closed()
        for _ in range(100):
            if proc.poll() is not None:
                break
            await asyncio.sleep(0.01)
        else:
            proc.kill()
        for pipe in (proc.stdin, proc.stdout):
            if pipe is not None:
                try:
                    pipe.close()
                except OSError:
                    pass


def _ignore_reply(lines: list[bytes] | None, error: str | None) -> None:
    if error is not None:
        log.debug("tmux command failed: %s", error)
