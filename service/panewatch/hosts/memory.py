"""The in-memory host: panes whose "agent" is a test (or a tiny built-in program), no process.

The test plays the agent through the handle — ``emit`` output, ``exit`` with a code, move the
foreground group — and reads what the engine typed in ``handle.input``. Built-in programs
(``argv[0]``) make it pass the same host contract tests as the pty host:

- ``cat``: writes back every byte it reads (raw, no echo processing);
- ``exit CODE [TEXT]``: prints TEXT, then exits with CODE on the next loop turn;
- ``size``: prints ``size ROWS COLS`` at start and after every resize;
- ``idle``: prints nothing and never reads (a stuck agent);
- ``agent``: nothing built in: the test plays it through the handle;
- ``sh``: the same, for a session launched as a shell (what it runs is the shell's to read).

Anything else is "not found" (``SpawnError``), like a missing binary. Output is delivered on
the event loop (``call_soon``), never inside the engine's own call, as a real host does.
"""

from __future__ import annotations

import asyncio
import itertools
import signal as signals
from collections.abc import Callable

from ..states import State
from .base import HostKind, LaunchSpec, PaneHandle, PaneSink, SpawnError, WriteRefused

#: Most bytes a program that does not read may have queued before writes are refused.
INPUT_LIMIT = 1 << 20

_pids = itertools.count(10_000)


class MemoryHandle:
    """One in-memory pane; the methods below the protocol's are the test's (the agent's) side."""

    answers_queries = False

    def __init__(self, spec: LaunchSpec, sink: PaneSink, loop: asyncio.AbstractEventLoop | None) -> None:
        self.spec, self.sink, self._loop = spec, sink, loop
        self._pid = next(_pids)
        self.rows, self.cols = spec.rows, spec.cols
        self.input = bytearray()  # every byte written to the agent, in order
        self.unread = 0  # bytes written that a non-reading program left queued
        self.reads_input = True
        self.on_input: Callable[[bytes], None] | None = None
        self.on_resize: Callable[[int, int], None] | None = None
        self.signals: list[int] = []
        self.fg_pgid: int | None = self._pid
        self.returncode: int | None = None
        self.paused = False
        self._held = bytearray()  # output emitted while reading was paused
        self.closed = False

    # -- PaneHandle ------------------------------------------------------------------------
    @property
    def pid(self) -> int | None:
        return self._pid

    @property
    def agent_pid(self) -> int | None:
        return self.pid  # no sandbox in between

    @property
    def alive(self) -> bool:
        return self.returncode is None

    @property
    def ref(self) -> str:
        return f"memory:{self._pid}"

    def write(self, data: bytes) -> None:
        if not self.alive:
            raise WriteRefused("the process has exited")
        if not self.reads_input and self.unread + len(data) > INPUT_LIMIT:
            raise WriteRefused(f"the process is not reading its input ({self.unread} bytes queued)")
        self.input += data
        if not self.reads_input:
            self.unread += len(data)
        elif self.on_input is not None:
            self._later(lambda: self.on_input(data) if self.on_input and self.alive else None)

    def resize(self, rows: int, cols: int) -> None:
        self.rows, self.cols = rows, cols
        if self.on_resize is not None and self.alive:
            self._later(lambda: self.on_resize(rows, cols) if self.on_resize else None)

    def signal(self, sig: int) -> None:
        self.signals.append(sig)

    def foreground_pgid(self) -> int | None:
        return self.fg_pgid if self.alive else None

    def pause_reading(self) -> None:
        self.paused = True

    def resume_reading(self) -> None:
        self.paused = False
        if self._held:
            data = bytes(self._held)
            self._held.clear()
            self.sink.on_output(data)

    async def terminate(self, grace: float = 2.0) -> int | None:
        if self.alive:
            self.signals.append(signals.SIGHUP)
            self.exit(-signals.SIGHUP, "killed by SIGHUP")
        return self.returncode

    def close(self) -> None:
        self.closed = True

    # -- the agent's side ------------------------------------------------------------------
    def emit(self, data: bytes | str) -> None:
        """The agent writes ``data`` to its terminal (held back while reading is paused)."""
        if isinstance(data, str):
            data = data.encode()
        if not self.alive:
            return
        if self.paused:
            self._held += data
        else:
            self.sink.on_output(data)

    def status(self, state: State, why: str = "", event: str = "status") -> None:
        """The host itself knows the state (as an ACP host does)."""
        self.sink.on_status(state, why, event)

    def exit(self, code: int | None, reason: str = "") -> None:
        """The agent is gone (``code`` None: lost without a status)."""
        if self.returncode is not None:
            return
        if self._held:
            self.sink.on_output(bytes(self._held))
            self._held.clear()
        self.returncode = code if code is not None else -1
        self.sink.on_exit(code, reason or f"exited with code {code}")

    def _later(self, fn: Callable[[], object]) -> None:
        loop = self._loop or asyncio.get_running_loop()
        loop.call_soon(fn)


class MemoryHost:
    """Panes held in memory; ``handles`` by session id, for the test to play the agents."""

    kind = HostKind.memory
    survives_restart = False

    def __init__(self) -> None:
        self.handles: dict[str, MemoryHandle] = {}
        #: panes "left running by a previous server": ref -> the screen they show (for adopt)
        self.detached: dict[str, bytes] = {}
        self.started = False
        self._loop: asyncio.AbstractEventLoop | None = None

    async def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        self.started = True

    async def stop(self) -> None:
        self.started = False

    async def spawn(self, spec: LaunchSpec, sink: PaneSink) -> PaneHandle:
        program = _PROGRAMS.get(spec.argv[0]) if spec.argv else None
        if program is None and spec.argv and spec.argv[0] not in ("agent", "sh"):
            raise SpawnError(f"cannot start {spec.argv[0]!r}: not found or not executable")
        handle = MemoryHandle(spec, sink, self._loop)
        self.handles[spec.session] = handle
        if program is not None:
            program(handle, list(spec.argv[1:]))
        return handle

    async def adopt(self, ref: str, session: str, sink: PaneSink) -> PaneHandle | None:
        """A pane put in ``detached`` is adopted: its screen first, then whatever the test emits."""
        screen = self.detached.pop(ref, None)
        if screen is None:
            return None
        handle = MemoryHandle(LaunchSpec(session, ("agent",), "/", {}, 24, 80), sink, self._loop)
        self.handles[session] = handle
        handle._later(lambda: handle.emit(screen))
        return handle

    async def remove_orphans(self, keep: set[str]) -> list[str]:
        return []  # nothing outlives a test


def _cat(handle: MemoryHandle, args: list[str]) -> None:
    handle.on_input = handle.emit


def _exit(handle: MemoryHandle, args: list[str]) -> None:
    code = int(args[0]) if args else 0
    text = " ".join(args[1:])
    handle.reads_input = False

    def run() -> None:
        handle.emit(text)
        handle.exit(code)

    handle._later(run)


def _size(handle: MemoryHandle, args: list[str]) -> None:
    def show(rows: int, cols: int) -> None:
        handle.emit(f"size {rows} {cols}\r\n")

    handle.on_resize = show
    handle._later(lambda: show(handle.rows, handle.cols))


def _idle(handle: MemoryHandle, args: list[str]) -> None:
    handle.reads_input = False


_PROGRAMS: dict[str, Callable[[MemoryHandle, list[str]], None]] = {
    "cat": _cat,
    "exit": _exit,
    "size": _size,
    "idle": _idle,
}
