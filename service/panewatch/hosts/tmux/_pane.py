"""One agent in a tmux window (``PaneHandle``), and the bytes that paint its screen when adopted."""

from __future__ import annotations

import asyncio
import fcntl
import logging
import os
import signal as signals
import socket
import struct
import termios
from collections.abc import Callable
from pathlib import Path
from typing import Protocol

from ...procs.proctree import Cgroups, live, signal_groups, stat_fields
from ...procs.sandbox import agent_in_sandbox
from ..base import PaneSink, WriteRefused
from ._control import ControlClient, Reply
from ._kill import kill_tree, pane_marker, tree_members
from ._protocol import (
    INFO_FORMAT,
    OPT_PASTE,
    SEED_TRIES,
    TTY_QUEUE_FULL,
    WRITE_CHUNK,
    WRITE_QUEUE_LIMIT,
    PaneInfo,
    _exit_reason,
    quote,
)

log = logging.getLogger("panewatch.hosts.tmux")

# --- one pane -----------------------------------------------------------------------------


class PaneOwner(Protocol):
    """What a pane asks of its host (``TmuxHost``), named here so that the pane does not import
    the host that makes it."""

    control: ControlClient | None
    folder_tag: str

    @property
    def loop(self) -> asyncio.AbstractEventLoop: ...
    def _send(self, line: str, reply: Reply | None = None) -> None: ...
    def _nudge(self) -> None: ...
    def _buffer_name(self) -> str: ...
    def _cgroup_of(self, pane: TmuxPane) -> tuple[Cgroups, Path] | None: ...
    def _forget(self, pane: TmuxPane) -> None: ...
    async def _info(self, target: str) -> PaneInfo | None: ...
    async def _kill_window(self, pane: TmuxPane) -> None: ...
    def _lost(self, pane: TmuxPane, code: int | None, reason: str) -> None: ...


class TmuxPane:
    """One agent in a tmux window. See ``PaneHandle`` for the contract."""

    answers_queries = True

    def __init__(
        self, host: PaneOwner, session: str, pane_id: str, window_id: str, pid: int | None, sink: PaneSink
    ) -> None:
        self.host = host
        self.session = session
        self.pane_id = pane_id
        self.window_id = window_id
        self._pid = pid
        self.sink = sink
        self.returncode: int | None = None
        self.exited = False
        self._pidfd = -1
        self._seeding = False
        self._paused = False
        self._output_count = 0
        self._paste: bool | None = None
        self._closed = False
        self._reaping = False
        self.tty: str | None = None  # the pane's terminal, to see whether the agent reads its input
        self._held: bytearray | None = None  # output kept for the engine until it has the handle
        self._sent_while_full = 0
        self.contained = False  # the pane's process is a sandbox (``panewatch.procs.sandbox``), the agent inside
        self.cgroup: Path | None = None  # the pane's own cgroup, when the host could make one
        self._agent_pid: int | None = None
        self.marker = pane_marker(host.folder_tag, session)  # what its processes carry (MARKER_VAR)

    # -- identity ------------------------------------------------------------------------
    @property
    def pid(self) -> int | None:
        return self._pid

    @property
    def agent_pid(self) -> int | None:
        """The pane's process, or in a sandbox the agent inside it once it runs (then kept)."""
        if not self.contained:
            return self._pid
        if self._agent_pid is None and self._pid is not None and not self.exited:
            self._agent_pid = agent_in_sandbox(self._pid)
        return self._agent_pid

    @property
    def alive(self) -> bool:
        return not self.exited

    @property
    def ref(self) -> str:
        return self.pane_id

    # -- output --------------------------------------------------------------------------
    def hold(self, early: bytes | bytearray) -> None:
        """Keep this new pane's output until the next loop turn, when the engine has its handle:
        first what the control client saw before the pane was known, then what came since."""
        self._held = bytearray(early)
        self.host.loop.call_soon(self._release)

    def _release(self) -> None:
        held, self._held = self._held, None
        if held:
            self._output(bytes(held))

    def _output(self, data: bytes) -> None:
        if self._held is not None:
            self._held += data
            return
        self._output_count += 1
        if self._seeding:
            return  # the capture being made already shows these bytes
        self._track_paste(data)
        self.sink.on_output(data)

    def _track_paste(self, data: bytes) -> None:
        """Remember bracketed paste in a window option: a later adopter cannot ask tmux for it."""
        on, off = data.rfind(b"\x1b[?2004h"), data.rfind(b"\x1b[?2004l")
        if on == off:
            return
        state = on > off
        if state != self._paste:
            self._paste = state
            self.host._send(f"set-option -w -t {self.window_id} {OPT_PASTE} {int(state)}")

    def seed(self, info: PaneInfo, then: Callable[[PaneInfo], None] | None = None, tries: int = SEED_TRIES) -> None:
        """Replace the engine's view with tmux's current screen, then resume the live stream.

        The captures (the visible screen, and the main one behind an alternate screen) and the
        cursor are separate replies; if any output of this pane arrived between the first and
        the last, they may disagree, so it is redone.
        """
        self._seeding = True
        parts: dict[str, list[bytes]] = {}
        mark = [0]
        visible = f"capture-pane -p -e -t {self.pane_id}"
        if info.dead:  # tmux scrolled the screen by one line to write "Pane is dead"
            visible += f" -S -1 -E {max(0, info.rows - 2)}"

        def got(key: str) -> Reply:
            def reply(lines: list[bytes] | None, error: str | None) -> None:
                if key == first:
                    mark[0] = self._output_count
                parts[key] = lines or []
                if key != "info":
                    return
                new = PaneInfo.parse(lines[0]) if lines else None
                if error is not None or new is None or new.pane_id != self.pane_id:
                    self._seeding = False
                    if then:
                        then(info)
                    return
                if (self._output_count != mark[0] or new.alternate != info.alternate) and tries > 1:
                    self.seed(new, then, tries - 1)
                    return
                self._seeding = False
                data = seed_bytes(parts.get("main", []), parts.get("visible", []), new)
                if self._paste is None:
                    self._paste = new.bracketed_paste
                self.sink.on_output(data)
                if then:
                    then(new)

            return reply

        first = "main" if info.alternate else "visible"
        if info.alternate:
            self.host._send(f"capture-pane -p -e -a -q -t {self.pane_id}", got("main"))
        self.host._send(visible, got("visible"))
        self.host._send(f"display-message -p -t {self.pane_id} {quote(INFO_FORMAT)}", got("info"))

    # -- input ---------------------------------------------------------------------------
    def write(self, data: bytes) -> None:
        if self.exited:
            raise WriteRefused("the process has exited")
        if self.host.control is None or self.host.control.closed:
            raise WriteRefused("the tmux server is gone")
        if self.host.control.queued + len(data) * 4 > WRITE_QUEUE_LIMIT:
            raise WriteRefused("tmux is not taking input")
        # tmux buffers input without limit; the terminal's own input queue says whether the agent
        # reads: full means it does not, and what is sent meanwhile waits in tmux's memory
        if self._input_queue_full():
            if self._sent_while_full + len(data) > WRITE_QUEUE_LIMIT:
                raise WriteRefused(f"the process is not reading its input ({self._sent_while_full} bytes queued)")
            self._sent_while_full += len(data)
        else:
            self._sent_while_full = 0
        for start in range(0, len(data), WRITE_CHUNK):
            chunk = data[start : start + WRITE_CHUNK]
            for i, piece in enumerate(chunk.split(b"\0")):
                if i:
                    self.host._send(f"send-keys -H -t {self.pane_id} 00")
                if piece:
                    name = self.host._buffer_name()
                    self.host._send(f"set-buffer -b {name} {quote(piece)}")
                    self.host._send(f"paste-buffer -d -r -b {name} -t {self.pane_id}")

    def _input_queue_full(self) -> bool:
        """Bytes waiting in the pane terminal's input queue, near the kernel's 4 KB: not read.
        The terminal is opened only for the check: holding it would hide the agent's exit."""
        if not self.tty:
            return False
        try:
            fd = os.open(self.tty, os.O_RDONLY | os.O_NOCTTY | os.O_NONBLOCK)
        except OSError:
            return False
        try:
            waiting: int = struct.unpack("i", fcntl.ioctl(fd, termios.FIONREAD, b"\0\0\0\0"))[0]
        except OSError:
            return False
        finally:
            os.close(fd)
        return waiting >= TTY_QUEUE_FULL

    def resize(self, rows: int, cols: int) -> None:
        if not self.exited:
            self.host._send(f"resize-window -t {self.window_id} -x {cols} -y {rows}")

    def signal(self, sig: int) -> None:
        """``sig`` to the agent's group and the terminal's foreground group (in a sandbox the
        agent's, not bwrap's: bwrap dies of a SIGHUP and its death SIGKILLs the agent)."""
        if self._pid is None or self.exited:
            return
        signal_groups(self.agent_pid or self._pid, self.foreground_pgid(), sig)

    def foreground_pgid(self) -> int | None:
        """``tpgid`` of the pane's first process: its terminal's foreground group, no fork."""
        if self._pid is None or self.exited:
            return None
        fields = stat_fields(self._pid)
        if fields is None:
            return None
        tpgid = int(fields[5])
        if tpgid <= 0 or (self.contained and tpgid == self._pid):
            return None  # none, or the sandbox's own group before the agent took the terminal
        return tpgid

    def pause_reading(self) -> None:
        if not self._paused and not self.exited:
            self._paused = True
            self.host._send(f"refresh-client -A {quote(self.pane_id + ':off')}")  # a bare %N is a parse error

    def resume_reading(self) -> None:
        if self._paused and not self.exited:
            self._paused = False
            self.host._send(f"refresh-client -A {quote(self.pane_id + ':on')}")
            self._reseed()

    def _reseed(self) -> None:
        """Output tmux dropped for us (paused pane) is recovered from its screen."""
        self.host._send(
            f"display-message -p -t {self.pane_id} {quote(INFO_FORMAT)}",
            lambda lines, err: self._reseed_with(lines) if err is None else None,
        )

    def _reseed_with(self, lines: list[bytes] | None) -> None:
        info = PaneInfo.parse(lines[0]) if lines else None
        if info is not None and info.pane_id == self.pane_id:
            self.seed(info)

    # -- exit ----------------------------------------------------------------------------
    def watch(self) -> None:
        """See the agent's exit through a pidfd (no polling, no tmux hook)."""
        if self._pid is None or self._pidfd >= 0:
            return
        try:
            self._pidfd = os.pidfd_open(self._pid)
        except OSError:  # already gone
            self.host.loop.call_soon(self._reap)
            return
        self.host.loop.add_reader(self._pidfd, self._reap)

    def _unwatch(self) -> None:
        if self._pidfd >= 0:
            self.host.loop.remove_reader(self._pidfd)
            os.close(self._pidfd)
            self._pidfd = -1

    def _reap(self) -> None:
        self._unwatch()
        if self.exited or self._reaping:
            return
        self._reaping = True
        self.host.loop.create_task(self._collect())

    async def _collect(self) -> None:
        """The pane's first process is gone: ask tmux for its status once tmux has it.

        ``pane_dead_status`` is set when tmux reaps the child; waiting a little more for
        ``pane_dead`` (the terminal closed) lets the last output arrive. Then the screen is
        repainted from tmux's own: output of a pane that dies at once can miss the control
        client, never tmux's screen."""
        code: int | None = None
        reason = "exited; tmux gave no status"
        info: PaneInfo | None = None
        for attempt in range(250):
            info = await self.host._info(self.pane_id)
            if info is None:
                reason = "its tmux window was closed"
                break
            if info.exit_code is not None:
                code = info.exit_code
                reason = _exit_reason(code)
                if info.dead or attempt > 10:
                    break
            else:
                fields = stat_fields(self._pid or 0)
                if fields is None and info.dead and attempt > 10:
                    break  # reaped without a status tmux could give
                if fields is not None and fields[0] == b"Z" and attempt % 10 == 9:
                    # tmux 3.3a now and then misses a SIGCHLD and leaves the agent a zombie
                    # with no status; another SIGCHLD makes it reap and record it
                    self.host._nudge()
            await asyncio.sleep(0.02)
        if info is not None:
            done: asyncio.Future[None] = self.host.loop.create_future()
            self.seed(info, lambda _: None if done.done() else done.set_result(None))
            await done
        self.host._lost(self, code, reason)

    async def terminate(self, grace: float = 2.0) -> int | None:
        """SIGHUP to the whole tree (descendants and marker holders; in a sandbox to the agent's
        groups, which end it and then the sandbox), SIGKILL after ``grace`` and the shared
        reaper's stop-and-kill for stragglers, the cgroup killed whole (also after the agent
        exited by itself: its daemons), then the window goes: nothing of the agent is left in
        tmux or in the process table."""
        if not self.exited and self._pid is not None:
            pids = await asyncio.to_thread(tree_members, self.session, self.marker, self._pid)
            if self.contained:
                self.signal(signals.SIGHUP)
                self.signal(signals.SIGCONT)
            else:
                self._kill(pids, signals.SIGHUP)
                self._kill(pids, signals.SIGCONT)
            deadline = self.host.loop.time() + grace
            while self.host.loop.time() < deadline and any(live(p) for p in pids):
                await asyncio.sleep(0.02)
            # SIGKILL to the tree as it is, the root first: the reaper's stop phase cannot hold
            # the root (tmux resumes a stopped pane process, SIGCONT to its group), and a root
            # still running when its children die exits 137 instead of being killed; the
            # reaper's rescan then ends whatever was forked meanwhile (it carries the marker)
            tree = await asyncio.to_thread(tree_members, self.session, self.marker, self._pid)
            self._kill({self._pid}, signals.SIGKILL)
            self._kill(tree, signals.SIGKILL)
            await asyncio.to_thread(kill_tree, self.session, self.marker, self._pid, self.host._cgroup_of(self))
            deadline = self.host.loop.time() + 2.0
            while not self.exited and self.host.loop.time() < deadline:
                await asyncio.sleep(0.01)
        elif self.cgroup is not None:  # exited by itself: what it left running is still in its cgroup
            await asyncio.to_thread(kill_tree, self.session, self.marker, None, self.host._cgroup_of(self))
        await self.host._kill_window(self)
        return self.returncode

    @staticmethod
    def _kill(pids: set[int], sig: int) -> None:
        for pid in pids:
            try:
                os.kill(pid, sig)
            except (ProcessLookupError, PermissionError):
                pass

    def close(self) -> None:
        """Stop watching; the tmux window stays (``terminate`` removes it). A server that stops
        closes every handle and its agents keep running for the next one to adopt."""
        self._closed = True
        self._unwatch()
        self.host._forget(self)


def seed_bytes(main: list[bytes], visible: list[bytes], info: PaneInfo) -> bytes:
    """Terminal bytes that paint tmux's current screen on a blank emulator of the same size."""
    out = bytearray(b"\x1b[0m\x1b[r\x1b[?1049l\x1b[H\x1b[2J")

    def paint(lines: list[bytes]) -> None:
        for row, line in enumerate(lines[: info.rows]):
            if line:
                out.extend(b"\x1b[%d;1H" % (row + 1) + line + b"\x1b[0m")

    if info.alternate:
        paint(main)
        out.extend(b"\x1b[?1049h\x1b[H\x1b[2J")
    paint(visible)
    if (info.scroll_top, info.scroll_bottom) not in ((0, info.rows - 1), (0, 0)):
        out.extend(b"\x1b[%d;%dr" % (info.scroll_top + 1, info.scroll_bottom + 1))
    if info.title and info.title != socket.gethostname():  # tmux's default title is the host name
        out.extend(b"\x1b]2;" + info.title.encode() + b"\x07")
    if info.app_cursor_keys:
        out.extend(b"\x1b[?1h")
    if info.bracketed_paste:
        out.extend(b"\x1b[?2004h")
    out.extend(b"\x1b[%d;%dH" % (info.cursor_y + 1, info.cursor_x + 1))
    out.extend(b"\x1b[?25h" if info.cursor_visible else b"\x1b[?25l")
    return bytes(out)
