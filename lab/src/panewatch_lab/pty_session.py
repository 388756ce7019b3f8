"""Run a program in a real PTY, answer its terminal queries, and keep its screen and bytes.

Agents such as Claude Code query the terminal (cursor position, device attributes, colours)
and may hang or draw differently when nobody answers, so the lab drives them the way a real
xterm would: through Panewatch's own emulated screen, whose ``reply`` answers those queries.
"""

from __future__ import annotations

import base64
import json
import os
import pty
import re
import signal
import struct
import termios
import threading
import time
import fcntl
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from panewatch.screen import Screen

#: Terminal queries an agent may send, named for the notes (answers come from the Screen).
QUERY_PATTERNS: dict[str, re.Pattern[bytes]] = {
    "CPR (CSI 6n)": re.compile(rb"\x1b\[\??6n"),
    "DA1 (CSI c)": re.compile(rb"\x1b\[0?c"),
    "DA2 (CSI > c)": re.compile(rb"\x1b\[>0?c"),
    "XTVERSION (CSI > q)": re.compile(rb"\x1b\[>0?q"),
    "kitty keyboard query (CSI ? u)": re.compile(rb"\x1b\[\?u"),
    "DECRQM (CSI ? n $ p)": re.compile(rb"\x1b\[\?\d+\$p"),
    "OSC colour query": re.compile(rb"\x1b\]1[0-2];\?"),
    "XTWINOPS size (CSI 14/18 t)": re.compile(rb"\x1b\[1[48]t"),
}


@dataclass
class Chunk:
    """One read from (``out``) or write to (``in``) the PTY, with its monotonic and wall time."""

    mono: float
    wall: float
    direction: str
    data: bytes


@dataclass
class PtySession:
    """A child process on a PTY of ``rows`` x ``cols``, read by a background thread."""

    argv: Sequence[str]
    env: Mapping[str, str] | None = None
    cwd: str | os.PathLike[str] | None = None
    rows: int = 40
    cols: int = 120
    chunks: list[Chunk] = field(default_factory=list)
    pid: int = -1
    fd: int = -1
    #: Optional hook to change (or drop, by returning None) the terminal's query answers,
    #: for experiments such as "what if the terminal does not support DECRQM?".
    answer_filter: Callable[[bytes], bytes | None] | None = None

    def __post_init__(self) -> None:
        self._lock = threading.Condition()
        self.screen = Screen(self.rows, self.cols, reply=self._answer)
        self._thread: threading.Thread | None = None
        self.exit_status: int | None = None

    # -- lifecycle -------------------------------------------------------------------------
    def start(self) -> PtySession:
        """Fork the child on a new PTY (it becomes the session leader with the PTY as its tty)."""
        env = dict(self.env) if self.env is not None else dict(os.environ)
        argv = list(self.argv)
        pid, fd = pty.fork()
        if pid == 0:  # child: only async-signal-safe work before exec
            try:
                if self.cwd is not None:
                    os.chdir(self.cwd)
                os.execvpe(argv[0], argv, env)
            finally:
                os._exit(127)
        self.pid, self.fd = pid, fd
        fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", self.rows, self.cols, 0, 0))
        self._thread = threading.Thread(target=self._read_loop, name=f"pty-{pid}", daemon=True)
        self._thread.start()
        return self

    def close(self, timeout: float = 3.0) -> None:
        """Terminate the child (SIGTERM, then SIGKILL) and release the PTY."""
        if self.pid > 0 and self.exit_status is None:
            for sig in (signal.SIGTERM, signal.SIGKILL):
                try:
                    os.kill(self.pid, sig)
                except ProcessLookupError:
                    break
                if self._reap(timeout):
                    break
        if self._thread is not None:
            self._thread.join(timeout)
        if self.fd >= 0:
            try:
                os.close(self.fd)
            except OSError:
                pass
            self.fd = -1

    def _reap(self, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                pid, status = os.waitpid(self.pid, os.WNOHANG)
            except ChildProcessError:
                return True
            if pid:
                self.exit_status = os.waitstatus_to_exitcode(status)
                return True
            time.sleep(0.02)
        return False

    def __enter__(self) -> PtySession:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- I/O -------------------------------------------------------------------------------
    def _read_loop(self) -> None:
        while True:
            try:
                data = os.read(self.fd, 65536)
            except OSError:
                data = b""
            if not data:
                break
            with self._lock:
                self.chunks.append(Chunk(time.monotonic(), time.time(), "out", data))
                self.screen.feed(data)
                self._lock.notify_all()
        with self._lock:
            self._lock.notify_all()

    def _answer(self, data: bytes) -> None:
        """Screen callback: a query's answer goes back to the child like typed input."""
        if self.answer_filter is not None:
            filtered = self.answer_filter(data)
            if filtered is None:
                self.chunks.append(Chunk(time.monotonic(), time.time(), "dropped-reply", data))
                return
            data = filtered
        self.chunks.append(Chunk(time.monotonic(), time.time(), "reply", data))
        try:
            os.write(self.fd, data)
        except OSError:
            pass

    def send(self, data: bytes | str) -> None:
        """Type ``data`` into the child's terminal."""
        raw = data.encode() if isinstance(data, str) else data
        with self._lock:
            self.chunks.append(Chunk(time.monotonic(), time.time(), "in", raw))
        os.write(self.fd, raw)

    def resize(self, rows: int, cols: int) -> None:
        with self._lock:
            self.rows, self.cols = rows, cols
            self.screen.resize(rows, cols)
        fcntl.ioctl(self.fd, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
        os.kill(self.pid, signal.SIGWINCH)

    # -- reading ---------------------------------------------------------------------------
    def text(self) -> str:
        with self._lock:
            return self.screen.text()

    def output(self, since: int = 0) -> bytes:
        """All bytes the child wrote, from chunk index ``since``."""
        with self._lock:
            return b"".join(c.data for c in self.chunks[since:] if c.direction == "out")

    def snapshot(self) -> tuple[bytes, list[str], bool]:
        """(every output byte so far, the screen's rows, mid-frame?) taken at one instant, so a
        capture's bytes are exactly the ones behind the screen that was checked."""
        with self._lock:
            data = b"".join(c.data for c in self.chunks if c.direction == "out")
            return data, self.screen.lines(), self.screen.mid_frame

    def mark(self) -> int:
        """An index into ``chunks`` to read output written after this moment."""
        with self._lock:
            return len(self.chunks)

    def wait_for(self, pattern: str | re.Pattern[str] | Callable[[str], bool], timeout: float = 10.0) -> bool:
        """Wait until the visible screen shows ``pattern`` (a literal string, a compiled regex or
        a predicate on the text); False on timeout or when the child has exited."""
        if isinstance(pattern, str):
            test: Callable[[str], bool] = lambda text: pattern in text  # noqa: E731
        elif isinstance(pattern, re.Pattern):
            test = lambda text: pattern.search(text) is not None  # noqa: E731
        else:
            test = pattern
        deadline = time.monotonic() + timeout
        with self._lock:
            while True:
                if test(self.screen.text()):
                    return True
                left = deadline - time.monotonic()
                if left <= 0 or (self._thread is not None and not self._thread.is_alive()):
                    return False
                self._lock.wait(min(left, 0.1))

    def wait_quiet(self, quiet: float = 0.3, timeout: float = 10.0) -> bool:
        """Wait until the child has written nothing for ``quiet`` seconds."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self._lock:
                last = next((c.mono for c in reversed(self.chunks) if c.direction == "out"), 0.0)
            if time.monotonic() - last >= quiet:
                return True
            time.sleep(min(quiet / 3, 0.05))
        return False

    def queries(self) -> dict[str, int]:
        """How many of each known terminal query the child has sent so far."""
        raw = self.output()
        return {name: len(rx.findall(raw)) for name, rx in QUERY_PATTERNS.items() if rx.search(raw)}

    def save(self, path: str | os.PathLike[str]) -> None:
        """Write the capture: ``<path>.raw`` (output bytes) and ``<path>.jsonl`` (timed chunks)."""
        base = Path(path)
        base.parent.mkdir(parents=True, exist_ok=True)
        with self._lock:
            chunks = list(self.chunks)
        base.with_suffix(".raw").write_bytes(b"".join(c.data for c in chunks if c.direction == "out"))
        with base.with_suffix(".jsonl").open("w") as fh:
            for c in chunks:
                fh.write(json.dumps({"mono": c.mono, "wall": c.wall, "dir": c.direction,
                                     "b64": base64.b64encode(c.data).decode()}) + "\n")
