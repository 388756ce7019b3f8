"""The tmux side of the wire: its constants, the command-language quoting, ``%output``
unescaping, and what ``display -p`` says about a pane."""

from __future__ import annotations

import codecs
import logging
import os
import re
import shutil
import signal as signals
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import cast

from ..base import HostError

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


def server_env() -> dict[str, str]:
    """tmux's own environment: no secrets (panes get theirs through ``env -i``)."""
    keep = ("PATH", "HOME", "USER", "LOGNAME", "SHELL", "TMPDIR", "LANG", "LC_ALL", "LC_CTYPE")
    env = {k: os.environ[k] for k in keep if k in os.environ}
    env.setdefault("LANG", "C.UTF-8")
    return env


def run_tmux(tmux: str, socket: Path, *args: str, timeout: float = 10.0) -> subprocess.CompletedProcess[str]:
    """One tmux client invocation on the server at ``socket``."""
    try:
        return subprocess.run(
            [tmux, "-u", "-S", str(socket), *args],
            capture_output=True,
            text=True,
            timeout=timeout,
            env=server_env(),
            check=False,
        )
    except (OSError, subprocess.SubprocessError) as exc:
        raise TmuxError(f"cannot run {tmux}: {exc}") from None
