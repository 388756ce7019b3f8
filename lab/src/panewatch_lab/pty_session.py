"""Run a program in a real PTY, answer its terminal queries, and keep its screen and bytes.

Agents such as Claude Code query the terminal (cursor position, device attributes, colours)
and may hang or draw differently when nobody answers, so the lab drives them the way a real
xterm would: through Panewatch's own emulated screen, whose ``reply`` answers those queries.

The PTY itself is the service's (``panewatch.procs.ptyproc.PtyProcess``: spawn, non-blocking reads
and writes, exit through a pidfd), run on an event loop in a thread of this session's own, so
the lab's synchronous tools drive agents exactly as the service does.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import re
import threading
import time
from collections.abc import Callable, Coroutine, Mapping, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from panewatch.procs.ptyproc import PtyProcess, WriteRefused
from panewatch.screen import Screen

T = TypeVar("T")

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
    #: Optional hook to change (or drop, by returning None) the terminal's query answers,
    #: for experiments such as "what if the terminal does not support DECRQM?".
    answer_filter: Callable[[bytes], bytes | None] | None = None

    def __post_init__(self) -> None:
        self._lock = threading.Condition()
        self.screen = Screen(self.rows, self.cols, reply=self._answer)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._proc: PtyProcess | None = None
        self.exit_status: int | None = None

    # -- lifecycle -------------------------------------------------------------------------
    def start(self) -> PtySession:
        """Start the child on a new PTY (session leader, the PTY its controlling terminal);
        ``ptyproc.SpawnError`` if it cannot be started."""
        env = dict(self.env) if self.env is not None else dict(os.environ)
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="pty-session", daemon=True)
        self._thread.start()
        try:
            self._proc = self._call(
                lambda: PtyProcess(
                    self.argv,
                    rows=self.rows,
                    cols=self.cols,
                    cwd=None if self.cwd is None else str(self.cwd),
                    env=env,
                    on_output=self._on_output,
                    on_exit=self._on_exit,
                    loop=self._loop,
                )
            )
        except BaseException:
            self._stop_loop()
            raise
        self.pid = self._proc.pid
        return self

    def close(self, timeout: float = 3.0) -> None:
        """Terminate the child (SIGHUP, then SIGKILL after ``timeout``) and release the PTY."""
        proc = self._proc
        if proc is not None:
            self._run(proc.terminate(grace=timeout), timeout + 5)
            self._call(proc.close)
            self._proc = None
        self._stop_loop()

    def _stop_loop(self) -> None:
        if self._loop is not None and self._thread is not None:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(5)
            self._loop.close()
            self._loop = self._thread = None

    def _call(self, fn: Callable[[], T], timeout: float = 10.0) -> T:
        """Run ``fn`` on the PTY's loop (where the process lives) and return its result."""
        assert self._loop is not None
        done: Future[T] = Future()

        def run() -> None:
            try:
                done.set_result(fn())
            except BaseException as exc:
                done.set_exception(exc)

        self._loop.call_soon_threadsafe(run)
        return done.result(timeout)

    def _run(self, coro: Coroutine[Any, Any, T], timeout: float) -> T:
        assert self._loop is not None
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(timeout)

    def __enter__(self) -> PtySession:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- I/O (the PTY's loop calls _on_output, _on_exit and, while feeding, _answer) -------
    def _on_output(self, data: bytes) -> None:
        with self._lock:
            self.chunks.append(Chunk(time.monotonic(), time.time(), "out", data))
            self.screen.feed(data)
            self._lock.notify_all()

    def _on_exit(self, code: int) -> None:
        with self._lock:
            self.exit_status = code
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
        if self._proc is not None:
            try:
                self._proc.write(data)
            except WriteRefused:
                pass

    def send(self, data: bytes | str) -> None:
        """Type ``data`` into the child's terminal."""
        raw = data.encode() if isinstance(data, str) else data
        with self._lock:
            self.chunks.append(Chunk(time.monotonic(), time.time(), "in", raw))
        proc = self._proc
        assert proc is not None, "not started"
        self._call(lambda: proc.write(raw))

    def resize(self, rows: int, cols: int) -> None:
        """New terminal size; the kernel sends SIGWINCH to the child's foreground group."""
        with self._lock:
            self.rows, self.cols = rows, cols
            self.screen.resize(rows, cols)
        proc = self._proc
        assert proc is not None, "not started"
        self._call(lambda: proc.resize(rows, cols))

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
                if left <= 0 or self.exit_status is not None:
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
                fh.write(
                    json.dumps(
                        {"mono": c.mono, "wall": c.wall, "dir": c.direction, "b64": base64.b64encode(c.data).decode()}
                    )
                    + "\n"
                )
