"""The tmux host: agents live in a private tmux server and outlive Panewatch.

One tmux server per Panewatch instance, on its own socket in the state folder. Every agent gets
its own tmux session holding one window (so ``tmux attach -t SESSION`` shows just that agent),
and that window is also linked into one hidden session, ``_panewatch``, to which exactly **one**
control-mode client (``tmux -C``) is attached: tmux sends every pane's output over it as
``%output`` lines and answers commands in ``%begin``/``%end`` blocks, in one ordered stream. No
tmux command is forked per pane per sweep: output is pushed, the foreground process group comes
from ``/proc/<pane pid>/stat``, and an agent's exit is seen through a pidfd on its pid.

Input goes through a paste buffer written with octal escapes and pasted raw (``paste-buffer -r``),
so the agent gets exactly the bytes the engine chose (NUL through ``send-keys -H 00``).

A pane's command is a launch script in the state folder (``launch/``, 0600, deleted by its first
line): the agent's environment and argv would pass tmux's command length limit (~16 KB) on the
command line. The script joins the pane's cgroup (where the server may make one: then even an
``env -i setsid`` double-fork dies with the pane) and execs the agent, in its sandbox when the host
has one (``panewatch.procs.sandbox``; ``spawn`` wraps the argv, the one place this host does).
"""

from __future__ import annotations

import asyncio
import codecs
import collections
import fcntl
import hashlib
import logging
import os
import re
import secrets
import shlex
import shutil
import signal as signals
import socket
import struct
import subprocess
import termios
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import cast

from ..access.statedir import StateDirError, check_private, prepare_state_dir
from ..procs.proctree import CGROUP_ROOT as CGROUP_MOUNT
from ..procs.proctree import MARKER_VAR, Cgroups, Containment, Reaper, live, signal_groups
from ..procs.sandbox import Sandbox, Uncontainable, agent_in_sandbox
from .base import HostError, HostKind, LaunchRefused, LaunchSpec, PaneSink, SpawnError, WriteRefused

log = logging.getLogger("panewatch.hosts.tmux")

#: The hidden session the control client is attached to; every agent window is linked into it.
CONTROL_SESSION = "_panewatch"
SOCKET_NAME = "tmux.sock"
#: Oldest tmux with control-mode flow control (``pause-after``, ``refresh-client -A``).
MIN_VERSION = (3, 2)
#: Seconds of lag after which tmux pauses a pane instead of queueing its output without bound.
PAUSE_AFTER_S = 30
#: Bytes of input per paste buffer (a command line per chunk).
WRITE_CHUNK = 16 * 1024
#: Bytes queued on the control client's input before writes are refused.
WRITE_QUEUE_LIMIT = 1 << 20
#: Bytes in a terminal's input queue that mean its reader has stopped (the kernel holds 4 KB).
TTY_QUEUE_FULL = 3072
#: A user option on each agent window naming its Panewatch session (survives renames).
OPT_SESSION = "@panewatch"
#: A user option remembering bracketed paste (tmux has no format for it) for the next adopter.
OPT_PASTE = "@panewatch_bp"
#: User options telling a later adopter how the pane was started: in a sandbox, and in which cgroup.
OPT_CONTAINED = "@panewatch_contained"
OPT_CGROUP = "@panewatch_cgroup"
#: Where launch scripts wait for their pane (each deletes itself first thing).
LAUNCH_DIR = "launch"
#: How many times a screen capture is retried when output raced it.
SEED_TRIES = 5
#: Output held for panes a spawn has not registered yet: at most this many panes, this much each
#: (their first bytes arrive while the tmux invocation that made them returns).
EARLY_PANES, EARLY_BYTES = 64, 256 * 1024

_INFO_FIELDS = (
    "pane_id",
    "pane_pid",
    "window_id",
    OPT_SESSION,
    "pane_dead",
    "pane_dead_status",
    "pane_dead_signal",
    "cursor_x",
    "cursor_y",
    "cursor_flag",
    "alternate_on",
    "pane_width",
    "pane_height",
    "scroll_region_upper",
    "scroll_region_lower",
    "keypad_cursor_flag",
    OPT_PASTE,
    "pane_tty",
    OPT_CONTAINED,
    OPT_CGROUP,
    "pane_title",  # last: a title may hold a tab
)
INFO_FORMAT = "\t".join(f"#{{{f}}}" for f in _INFO_FIELDS)
_OCTAL_TABLE = {b"%03o" % i: bytes([i]) for i in range(256)}


class TmuxError(HostError):
    """tmux is missing, too old, unusable here, or refused a command."""


def tmux_version(tmux: str = "tmux") -> tuple[int, int] | None:
    """tmux's version as (major, minor), or None when it cannot be run."""
    path = shutil.which(tmux)
    if path is None:
        return None
    try:
        out = subprocess.run([path, "-V"], capture_output=True, text=True, timeout=5, check=False).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    found = re.search(r"(\d+)\.(\d+)", out)
    return (int(found.group(1)), int(found.group(2))) if found else None


def tmux_usable(tmux: str = "tmux") -> str | None:
    """None when this tmux can host panes, else the reason in a few words."""
    version = tmux_version(tmux)
    if version is None:
        return f"{tmux} is not installed (Debian: apt-get install tmux)"
    if version < MIN_VERSION:
        return f"tmux {version[0]}.{version[1]} is too old (3.2 or later is needed for control-mode flow control)"
    return None


def quote(data: str | bytes) -> str:
    """One tmux command-language argument that parses back to exactly ``data``'s bytes.

    Double quotes with octal escapes for everything but plain printable ASCII: no ``$``
    expansion, no ``~``, no ``;`` or ``#`` surprises, and control bytes cannot end the line.
    """
    raw = data.encode("utf-8", "surrogateescape") if isinstance(data, str) else data
    out = ['"']
    for c in raw:
        if c < 0x20 or c >= 0x7F or c in b"\"\\$#~;{}'":
            out.append(f"\\{c:03o}")
        else:
            out.append(chr(c))
    out.append('"')
    return "".join(out)


def unescape(data: bytes) -> bytes:
    """``%output`` data: tmux writes bytes below 0x20 and the backslash as ``\\ooo``.

    Every backslash tmux sends starts such an escape (a literal one is ``\\134``), which is
    also what Python's ``\\ooo`` means, so the C decoder does it in one pass: ten times the
    speed of a Python loop (0.3 against 2.9 µs a spinner frame). Anything it refuses (never
    seen from tmux) is decoded by the plain routine instead."""
    if b"\\" not in data:
        return data
    try:
        return cast(bytes, codecs.escape_decode(data)[0])  # typeshed says str; it is bytes
    except ValueError:
        return _unescape_plain(data)


def _unescape_plain(data: bytes) -> bytes:
    """``\\ooo`` escapes decoded by table; a backslash without three octal digits stays as it is."""
    parts = data.split(b"\\")
    out = [parts[0]]
    table = _OCTAL_TABLE
    for part in parts[1:]:
        code = table.get(part[:3])
        out.append(code + part[3:] if code is not None else b"\\" + part)
    return b"".join(out)


def _argv_arg(arg: str) -> str:
    """An argument for a tmux command given as argv: a trailing ``;`` would end the command."""
    return arg[:-1] + "\\;" if arg.endswith(";") else arg


def socket_path(state_dir: Path) -> Path:
    return Path(state_dir) / SOCKET_NAME


def attach_argv(state_dir: Path, session: str, tmux: str = "tmux") -> list[str]:
    """The command that opens an agent's pane in the user's own terminal."""
    return [shutil.which(tmux) or tmux, "-u", "-S", str(socket_path(state_dir)), "attach-session", "-t", f"={session}"]


def _proc_stat(pid: int) -> list[bytes] | None:
    """Fields of /proc/<pid>/stat after the command name (index 0 is the state)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            raw = f.read()
    except OSError:
        return None
    return raw[raw.rfind(b")") + 2 :].split()


def folder_tag(state_dir: Path) -> str:
    """A short name of the state folder: servers of other folders share the process table and the
    cgroup tree, so what a server finds its agents by names its folder too."""
    return hashlib.sha256(os.fsencode(os.path.realpath(state_dir))).hexdigest()[:8]


def pane_marker(tag: str, session: str) -> str:
    """The marker variable's value in an agent's environment (``proctree.MARKER_VAR``): derived
    from the state folder (``folder_tag``) and the session id, so a server that adopts the pane
    after a restart finds its processes too, and a server of another folder with a session of the
    same id never kills them (two test workers did: the same ids, one marker)."""
    return f"tmux.{tag}.{session}"


def cgroup_name(state_dir: Path, session: str) -> str:
    """The pane's cgroup, derived from the state folder and the session id like its marker (the
    path is also kept in a window option, for a server whose own cgroup moved)."""
    return f"tmux-{folder_tag(state_dir)}-{session}"


#: The shared reaper's stop-rescan-kill without records: tmux agents are no children of the server
#: and must outlive it (no leftovers file); their cgroup, if any, is killed first (``kill_tree``).
_REAPER = Reaper(None, cgroups=False)


def kill_tree(session: str, marker: str, root: int | None, cgroup: tuple[Cgroups, Path] | None = None) -> int:
    """Kill every process of an agent: its cgroup whole (frozen, then killed: nothing forks out of
    it), its tree by the parent chain and whatever carries its marker (a ``setsid`` grandchild
    whose parent died); returns how many (proctree, blocking). The emptied cgroup is removed."""
    killed = 0
    if cgroup is not None:
        cgroups, path = cgroup
        killed += len(cgroups.kill_all(path))
    killed += _REAPER.kill(Containment(session, marker, None, root), include_root=root is not None)
    if cgroup is not None:
        _remove_cgroup(cgroup[1])
    return killed


def _remove_cgroup(path: Path) -> None:
    """rmdir once the killed members are gone (they leave the cgroup as they exit, a moment later)."""
    for _ in range(200):
        if Cgroups.remove(path):
            return
        time.sleep(0.01)
    log.warning("could not remove the cgroup %s: a process in it did not die", path)


def tree_members(session: str, marker: str, root: int | None) -> set[int]:
    """The processes ``kill_tree`` would kill now."""
    return _REAPER.members(Containment(session, marker, None, root), include_root=root is not None)


@dataclass(frozen=True)
class PaneInfo:
    """What ``display -p INFO_FORMAT`` says about one pane."""

    pane_id: str
    pid: int | None
    window_id: str
    session: str
    dead: bool
    dead_status: int | None
    dead_signal: int | None
    cursor_x: int
    cursor_y: int
    cursor_visible: bool
    alternate: bool
    cols: int
    rows: int
    scroll_top: int
    scroll_bottom: int
    app_cursor_keys: bool
    bracketed_paste: bool
    tty: str
    title: str
    contained: bool = False  # started in a sandbox (a window option)
    cgroup: str = ""  # the pane's own cgroup (a window option), "" when it has none

    @classmethod
    def parse(cls, line: bytes) -> PaneInfo | None:
        parts = line.decode("utf-8", "replace").split("\t", len(_INFO_FIELDS) - 1)
        if len(parts) != len(_INFO_FIELDS) or not parts[0].startswith("%"):
            return None

        def num(s: str) -> int | None:
            return int(s) if s.strip().lstrip("-").isdigit() else None

        return cls(
            parts[0],
            num(parts[1]),
            parts[2],
            parts[3],
            parts[4] == "1",
            num(parts[5]),
            num(parts[6]),
            num(parts[7]) or 0,
            num(parts[8]) or 0,
            parts[9] != "0",
            parts[10] == "1",
            num(parts[11]) or 80,
            num(parts[12]) or 24,
            num(parts[13]) or 0,
            num(parts[14]) or 0,
            parts[15] == "1",
            parts[16] == "1",
            parts[17],
            parts[20],
            contained=parts[18] == "1",
            cgroup=parts[19],
        )

    @property
    def exit_code(self) -> int | None:
        if self.dead_signal:
            return -self.dead_signal
        return self.dead_status


def _exit_reason(code: int | None) -> str:
    if code is None:
        return "exited"
    if code < 0:
        try:
            return f"killed by {signals.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exited with status {code}"


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
            self._proc = subprocess.Popen(
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


# --- one pane -----------------------------------------------------------------------------


class TmuxPane:
    """One agent in a tmux window. See ``PaneHandle`` for the contract."""

    answers_queries = True

    def __init__(
        self, host: TmuxHost, session: str, pane_id: str, window_id: str, pid: int | None, sink: PaneSink
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
        fields = _proc_stat(self._pid)
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
                fields = _proc_stat(self._pid or 0)
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


# --- the host -----------------------------------------------------------------------------


class TmuxHost:
    """Panes in a private tmux server on ``<state_dir>/tmux.sock``; they survive the server."""

    kind = HostKind.tmux
    survives_restart = True

    def __init__(
        self,
        state_dir: Path | str,
        *,
        tmux: str = "tmux",
        pause_after: int = PAUSE_AFTER_S,
        sandbox: Sandbox | None = None,
        cgroups: bool = True,
    ) -> None:
        self.state_dir = Path(state_dir)
        self.folder_tag = folder_tag(self.state_dir)
        self.sandbox = sandbox
        self._want_cgroups = cgroups
        self.cgroups: Cgroups | None = None  # found at start: a cgroup per pane where one can be made
        self.socket = socket_path(self.state_dir)
        self.tmux = shutil.which(tmux) or tmux
        self.env_path = shutil.which("env") or "/usr/bin/env"
        self.pause_after = pause_after
        self.control: ControlClient | None = None
        self.panes: dict[str, TmuxPane] = {}  # by tmux pane id
        self._starting = 0  # spawns whose tmux invocation runs (in a worker thread)
        self._early: dict[str, bytearray] = {}  # their panes' output, seen before they are known
        self._loop: asyncio.AbstractEventLoop | None = None
        self._buffers = 0
        self._stopping = False
        self.server_pid: int | None = None
        self.pauses = 0  # panes tmux paused because this server read them too late
        self._reconnecting: asyncio.Task[None] | None = None
        self._panes_snapshot: tuple[float, asyncio.Task[dict[str, PaneInfo]]] | None = None

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        assert self._loop is not None, "TmuxHost.start() first"
        return self._loop

    # -- tmux invocations ----------------------------------------------------------------
    def _server_env(self) -> dict[str, str]:
        """tmux's own environment: no secrets (panes get theirs through ``env -i``)."""
        keep = ("PATH", "HOME", "USER", "LOGNAME", "SHELL", "TMPDIR", "LANG", "LC_ALL", "LC_CTYPE")
        env = {k: os.environ[k] for k in keep if k in os.environ}
        env.setdefault("LANG", "C.UTF-8")
        return env

    def _run(self, *args: str, timeout: float = 10.0) -> subprocess.CompletedProcess[str]:
        """One tmux client invocation (start-up, spawn, cleanup: never per sweep)."""
        try:
            return subprocess.run(
                [self.tmux, "-u", "-S", str(self.socket), *args],
                capture_output=True,
                text=True,
                timeout=timeout,
                env=self._server_env(),
                check=False,
            )
        except (OSError, subprocess.SubprocessError) as exc:
            raise TmuxError(f"cannot run {self.tmux}: {exc}") from None

    def _send(self, line: str, reply: Reply | None = None) -> None:
        if self.control is None or self.control.closed:
            if reply:
                reply(None, "the tmux control client is gone")
            return
        self.control.send(line, reply)

    def _nudge(self) -> None:
        if self.server_pid:
            try:
                os.kill(self.server_pid, signals.SIGCHLD)
            except OSError:
                pass

    def _buffer_name(self) -> str:
        self._buffers += 1
        return f"panewatch-{os.getpid()}-{self._buffers}"

    # -- lifecycle -----------------------------------------------------------------------
    def check_ready(self) -> None:
        """A usable tmux, a private state folder, a socket that is ours (one-line errors)."""
        reason = tmux_usable(self.tmux)
        if reason:
            raise TmuxError(reason)
        try:
            prepare_state_dir(self.state_dir)
            check_private(self.socket, "tmux socket")
        except StateDirError as exc:
            raise TmuxError(str(exc)) from None
        if len(os.fsencode(self.socket)) >= 104:
            raise TmuxError(
                f"the state folder path is too long for a socket ({self.socket}); use a shorter --state-dir"
            )

    async def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        self.check_ready()
        if self.sandbox is not None:
            await self.sandbox.start()
        if self._want_cgroups:
            self.cgroups = await asyncio.to_thread(Cgroups.detect)
        await asyncio.to_thread(self._clear_leftovers)
        await self._ensure_server()
        await self._connect()

    def _clear_leftovers(self) -> None:
        """Launch scripts a killed server left (written, never run: they hold an environment), and
        this folder's pane cgroups that nothing runs in any more (rmdir fails on a live one)."""
        for left in (self.state_dir / LAUNCH_DIR).glob("*.sh"):
            left.unlink(missing_ok=True)
        if self.cgroups is not None:
            for cgroup in self.cgroups.base.glob(cgroup_name(self.state_dir, "*")):
                Cgroups.remove(cgroup)

    def _cgroup_of(self, pane: TmuxPane) -> tuple[Cgroups, Path] | None:
        if pane.cgroup is None or self.cgroups is None:
            return None
        return self.cgroups, pane.cgroup

    def _trusted_cgroup(self, session: str, recorded: str) -> Path | None:
        """The cgroup a window option names, if it is one of ours for this session (a server
        whose own cgroup moved still finds its panes'); else the one this server would make."""
        if self.cgroups is None:
            return None
        name = cgroup_name(self.state_dir, session)
        for path in (Path(recorded) if recorded else None, self.cgroups.base / name):
            ours = path is not None and path.name == name and path.parent.name == "panewatch"
            if ours and path is not None and path.is_relative_to(CGROUP_MOUNT) and path.is_dir():
                return path
        return None

    async def _ensure_server(self) -> None:
        proc = await asyncio.to_thread(self._run, "has-session", "-t", f"={CONTROL_SESSION}")
        if proc.returncode != 0:
            # "cat" keeps the hidden session alive, reading a terminal nobody types into
            proc = await asyncio.to_thread(
                self._run,
                "-f",
                "/dev/null",
                "new-session",
                "-d",
                "-s",
                CONTROL_SESSION,
                "-n",
                "_control",
                "-x",
                "80",
                "-y",
                "24",
                "cat",
            )
            if proc.returncode != 0 and "duplicate session" not in proc.stderr:
                raise TmuxError(f"cannot start tmux on {self.socket}: {proc.stderr.strip() or proc.stdout.strip()}")
        if self.socket.stat().st_mode & 0o077:  # tmux makes it 0600 (+x while attached)
            os.chmod(self.socket, 0o600)
        # remain-on-exit keeps a dead pane's status and screen; window-size stays the default
        # globally (tmux 3.3a crashes creating windows under a global "manual") and is set to
        # manual per window so an attached terminal never resizes an agent
        opts = [
            ("set-option", "-g", "exit-empty", "off"),
            ("set-option", "-gw", "remain-on-exit", "on"),
            ("set-option", "-gw", "automatic-rename", "off"),
            ("set-option", "-gw", "allow-rename", "off"),
            ("set-option", "-g", "destroy-unattached", "off"),
            ("set-option", "-s", "escape-time", "10"),
            ("set-option", "-g", "history-limit", "1000"),
            ("set-option", "-gw", "aggressive-resize", "off"),
        ]
        args: list[str] = []
        for opt in opts:
            args.extend([*opt, ";"])
        proc = await asyncio.to_thread(self._run, *args[:-1])
        if proc.returncode != 0:
            raise TmuxError(f"tmux on {self.socket} refused its options: {proc.stderr.strip()}")

    async def _connect(self) -> None:
        self.control = ControlClient(
            [self.tmux, "-u", "-S", str(self.socket), "-C", "attach-session", "-t", f"={CONTROL_SESSION}"],
            self._server_env(),
            on_output=self._on_output,
            on_notice=self._on_notice,
            on_close=self._on_close,
        )
        await self.control.start()
        # flow control: a pane more than pause_after seconds behind is paused, not queued forever
        await self.control.command(f"refresh-client -f pause-after={self.pause_after}")
        lines = await self.control.command("display-message -p '#{pid}'")
        self.server_pid = int(lines[0]) if lines and lines[0].isdigit() else None

    async def stop(self) -> None:
        """Detach the control client; the tmux server and every agent keep running."""
        self._stopping = True
        if self._reconnecting is not None:
            self._reconnecting.cancel()
        for pane in list(self.panes.values()):
            pane._unwatch()
        if self.control is not None:
            await self.control.stop()
        self.panes.clear()

    async def kill_server(self) -> None:
        """End the tmux server and every agent in it (tests, and a user's explicit reset)."""
        await asyncio.to_thread(self._run, "kill-server")

    # -- notifications -------------------------------------------------------------------
    def _on_output(self, pane_id: str, data: bytes) -> None:
        pane = self.panes.get(pane_id)
        if pane is not None:
            pane._output(data)
        elif self._starting and len(self._early) < EARLY_PANES:  # a pane ``spawn`` has not seen yet
            early = self._early.setdefault(pane_id, bytearray())
            if len(early) < EARLY_BYTES:
                early += data

    def _on_notice(self, name: str, args: list[str]) -> None:
        if name == "%pause" and args:
            self.pauses += 1
            pane = self.panes.get(args[0])
            self._send(f"refresh-client -A {quote(args[0] + ':continue')}")
            if pane is not None:
                log.info(
                    "tmux paused the pane's output (reading %s s behind); catching up from its screen",
                    self.pause_after,
                    extra={"session": pane.session},
                )
                pane._reseed()
        elif name in ("%window-close", "%unlinked-window-close") and args:
            for pane in list(self.panes.values()):
                if pane.window_id == args[0] and not pane.exited:
                    pane._reap()
        elif name == "%exit":
            pass  # followed by EOF, handled in _on_close

    def _on_close(self) -> None:
        if self._stopping:
            return
        log.warning("the tmux server on %s is gone; its sessions are lost", self.socket)
        for pane in list(self.panes.values()):
            self._lost(pane, None, "the tmux server is gone")
        self.panes.clear()
        self._reconnecting = self.loop.create_task(self._reconnect())

    async def ensure_running(self) -> None:
        """A tmux server and control client up now (after the server was killed), or TmuxError."""
        if self._reconnecting is not None and not self._reconnecting.done():
            await asyncio.shield(self._reconnecting)
        if self.control is not None and not self.control.closed:
            return
        await self._ensure_server()
        await self._connect()

    async def _reconnect(self) -> None:
        """A fresh tmux server for the sessions started (or resumed) from now on."""
        for delay in (0.1, 0.5, 2.0, 5.0):
            await asyncio.sleep(delay)
            if self._stopping or (self.control is not None and not self.control.closed):
                return
            try:
                await self._ensure_server()
                await self._connect()
                log.info("a new tmux server runs on %s", self.socket)
                return
            except (TmuxError, OSError) as exc:
                log.warning("could not start a new tmux server on %s: %s", self.socket, exc)

    def _lost(self, pane: TmuxPane, code: int | None, reason: str) -> None:
        if pane.exited:
            return
        pane._unwatch()
        pane.exited = True
        pane.returncode = code
        if pane.cgroup is not None and Cgroups.remove(pane.cgroup):  # empty: nothing left to kill
            pane.cgroup = None  # (a daemon it left keeps it, for the DELETE to kill)
        pane.sink.on_exit(code, reason)

    def _forget(self, pane: TmuxPane) -> None:
        if self.panes.get(pane.pane_id) is pane:
            del self.panes[pane.pane_id]

    async def _info(self, target: str) -> PaneInfo | None:
        """The pane's info, None when it is gone (``display`` falls back to another pane, so
        the answer's id is checked)."""
        if self.control is None or self.control.closed:
            return None
        try:
            lines = await self.control.command(f"display-message -p -t {target} {quote(INFO_FORMAT)}")
        except TmuxError:
            return None
        info = PaneInfo.parse(lines[0]) if lines else None
        return info if info is not None and info.pane_id == target else None

    async def _kill_window(self, pane: TmuxPane) -> None:
        if self.control is None or self.control.closed:
            return
        try:
            await self.control.command(f"kill-window -t {pane.window_id}")
        except TmuxError:
            pass  # already gone
        try:
            await self.control.command(f"kill-session -t {quote('=' + pane.session)}")
        except TmuxError:
            pass

    # -- panes ---------------------------------------------------------------------------
    def _spawn_args(self, spec: LaunchSpec) -> tuple[list[str], bool, Path | None, Path]:
        """The one tmux invocation that creates the agent's session and window and links it to
        the control session, whether the agent is contained, its cgroup and launch script;
        ``SpawnError`` for what cannot start. Run in a worker (it writes the launch file)."""
        argv = list(spec.argv)
        if not argv:
            raise SpawnError("empty command")
        if not os.path.isdir(spec.cwd):
            raise SpawnError(f"cannot start {argv[0]!r}: folder {spec.cwd!r} does not exist")
        if shutil.which(argv[0], path=spec.env.get("PATH", os.defpath)) is None and not os.access(argv[0], os.X_OK):
            raise SpawnError(f"cannot start {argv[0]!r}: not found or not executable")
        contained = self.sandbox is not None and self.sandbox.active
        if self.sandbox is not None:
            try:
                argv = self.sandbox.wrap(argv, spec.env)
            except Uncontainable as exc:
                raise LaunchRefused(str(exc)) from None
        name = spec.session
        cgroup = self._make_cgroup(name)
        try:
            script = self._write_launch(spec, argv, cgroup)
        except OSError as exc:
            self._drop_cgroup(cgroup)
            raise SpawnError(f"cannot start {spec.argv[0]!r}: cannot write its launch file ({exc.strerror})") from None
        target = f"={name}:"
        options = [(OPT_SESSION, name)]
        if contained:
            options.append((OPT_CONTAINED, "1"))
        if cgroup is not None:
            options.append((OPT_CGROUP, str(cgroup)))
        args = [
            *("set-option", "-g", "default-size", f"{spec.cols}x{spec.rows}", ";"),
            *("new-session", "-d", "-s", name, "-n", name, "-c", spec.cwd.replace("#", "##")),
            *("-P", "-F", "#{pane_id} #{pane_pid} #{window_id} #{pane_tty}"),
            *("/bin/sh", _argv_arg(str(script))),
            *(";", "set-option", "-w", "-t", target, "window-size", "manual"),
        ]
        for option, value in options:
            args += [";", "set-option", "-w", "-t", target, option, _argv_arg(value)]
        args += [";", "link-window", "-d", "-s", target, "-t", f"={CONTROL_SESSION}:"]
        return args, contained, cgroup, script

    async def spawn(self, spec: LaunchSpec, sink: PaneSink) -> TmuxPane:
        """One tmux invocation, in a worker thread, creates the agent's session and window and
        links it to the control session atomically: a failure leaves nothing behind (no window,
        no launch script, no cgroup). Output the control client sees before the pane is known
        here is held for it, in order."""
        try:
            await self.ensure_running()  # after the server was killed: a new one for this agent
        except TmuxError as exc:
            raise SpawnError(f"the tmux server is not running: {exc}") from None
        args, contained, cgroup, script = await asyncio.to_thread(self._spawn_args, spec)
        self._starting += 1
        try:
            proc = await asyncio.to_thread(self._run, *args)
        finally:
            self._starting -= 1
        found = re.match(r"(%\d+) (\d+) (@\d+) (\S+)", proc.stdout.strip())
        if proc.returncode != 0 or not found:
            if found:  # created but not linked: take it away again
                await asyncio.to_thread(self._run, "kill-window", "-t", found.group(3))
            self._early.pop(found.group(1) if found else "", None)
            script.unlink(missing_ok=True)
            self._drop_cgroup(cgroup)
            raise SpawnError(f"cannot start {spec.argv[0]!r} in tmux: {proc.stderr.strip() or 'no pane'}")
        pane = TmuxPane(self, spec.session, found.group(1), found.group(3), int(found.group(2)), sink)
        pane.tty = found.group(4)
        pane.contained, pane.cgroup = contained, cgroup
        self.panes[pane.pane_id] = pane
        pane.hold(self._early.pop(pane.pane_id, b""))  # delivered once the engine has its handle
        pane.watch()
        return pane

    def _write_launch(self, spec: LaunchSpec, argv: list[str], cgroup: Path | None) -> Path:
        """The pane's command as a script (0600, private folder): it deletes itself, joins the
        pane's cgroup and execs ``env -i`` with the agent's environment, so no length limit of
        tmux's command line applies and nothing of the server's environment leaks in."""
        if "=" in os.path.basename(argv[0]):
            argv[0] = os.path.abspath(argv[0])  # env(1) would take NAME=VALUE for a variable
        env = {**spec.env, MARKER_VAR: pane_marker(self.folder_tag, spec.session)}
        assignments = [f"{k}={v}" for k, v in env.items() if k and "=" not in k and "\0" not in k + v]
        folder = self.state_dir / LAUNCH_DIR
        folder.mkdir(mode=0o700, exist_ok=True)
        path = folder / f"{spec.session}-{secrets.token_hex(4)}.sh"
        lines = [f"rm -f -- {shlex.quote(str(path))}"]
        if cgroup is not None:  # a failed join leaves the marker and the tree to contain it
            lines.append(f"{{ echo $$ > {shlex.quote(str(cgroup / 'cgroup.procs'))}; }} 2>/dev/null")
        words = [self.env_path, "-i", *assignments, *argv]
        lines.append("exec " + " ".join(shlex.quote(w) for w in words))
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
        with os.fdopen(fd, "wb") as out:
            out.write(("\n".join(lines) + "\n").encode("utf-8", "surrogateescape"))
        return path

    def _make_cgroup(self, session: str) -> Path | None:
        """The pane's own cgroup (made now, joined by its launch script), None where none can be."""
        if self.cgroups is None:
            return None
        try:
            path = self.cgroups.base / cgroup_name(self.state_dir, session)
            path.mkdir(exist_ok=True)  # a resumed session reuses its name
            return path
        except OSError as exc:
            log.warning("no cgroup for session %s (%s): its marker variable contains it", session, exc)
            return None

    @staticmethod
    def _drop_cgroup(cgroup: Path | None) -> None:
        if cgroup is not None:
            Cgroups.remove(cgroup)

    async def adopt(self, ref: str, session: str, sink: PaneSink) -> TmuxPane | None:
        """Take over a pane a previous server started: seed its screen, then stream it.

        None when the pane is gone, or when its id now names another session's pane (tmux
        reuses pane ids after its own restart)."""
        if self.control is None or self.control.closed or not re.fullmatch(r"%\d+", ref):
            return None
        info = (await self._all_panes()).get(ref)
        if info is None or info.session != session:
            return None
        pane = TmuxPane(self, session, info.pane_id, info.window_id, info.pid, sink)
        pane.tty = info.tty
        pane.contained, pane.cgroup = info.contained, self._trusted_cgroup(session, info.cgroup)
        self.panes[pane.pane_id] = pane
        seeded: asyncio.Future[PaneInfo] = self.loop.create_future()
        pane.seed(info, lambda i: None if seeded.done() else seeded.set_result(i))
        info = await seeded
        if info.dead or info.exit_code is not None:
            code = info.exit_code
            self._lost(pane, code, _exit_reason(code))
        else:
            pane.watch()
        return pane

    async def _all_panes(self) -> dict[str, PaneInfo]:
        """Every pane's info from one ``list-panes -a``, shared by the adoptions of a start-up
        (100 panes: one command, not 100)."""
        now = self.loop.time()
        if self._panes_snapshot is None or now - self._panes_snapshot[0] > 1.0:

            async def fetch() -> dict[str, PaneInfo]:
                assert self.control is not None
                try:
                    lines = await self.control.command(f"list-panes -a -F {quote(INFO_FORMAT)}")
                except TmuxError:
                    return {}
                found = (PaneInfo.parse(line) for line in lines)
                return {i.pane_id: i for i in found if i is not None}

            self._panes_snapshot = (now, self.loop.create_task(fetch()))
        return await asyncio.shield(self._panes_snapshot[1])

    async def remove_orphans(self, keep: set[str]) -> list[str]:
        """End agent windows no registry session names (a server killed between starting an agent
        and recording it); windows a user opened by hand carry no Panewatch id and stay."""
        gone = []
        for session, ref in (await self.list_sessions()).items():
            if session not in keep:
                info = (await self._all_panes()).get(ref)
                if info is not None:
                    cgroup = self._trusted_cgroup(session, info.cgroup)
                    root = info.pid if info.pid and not info.dead else None
                    await asyncio.to_thread(
                        kill_tree,
                        session,
                        pane_marker(self.folder_tag, session),
                        root,
                        (self.cgroups, cgroup) if cgroup and self.cgroups else None,
                    )
                    try:
                        await self.control.command(f"kill-window -t {info.window_id}")  # type: ignore[union-attr]
                    except TmuxError:
                        pass
                    gone.append(session)
        return gone

    async def list_sessions(self) -> dict[str, str]:
        """Panewatch session id → pane ref of every agent window in this tmux server."""
        if self.control is None or self.control.closed:
            return {}
        try:
            lines = await self.control.command(f"list-panes -a -F {quote('#{pane_id} #{' + OPT_SESSION + '}')}")
        except TmuxError:
            return {}
        out: dict[str, str] = {}
        for line in lines:
            ref, _, session = line.decode("utf-8", "replace").partition(" ")
            if session:
                out[session] = ref
        return out
