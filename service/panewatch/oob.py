"""Out-of-band signals: what an agent tells its terminal besides the screen's text.

Agents say their state in OSC strings a terminal does not draw: Codex writes OSC 7501
("Program Status Protocol": ``state=working|blocked|done|idle|error|clear``, ``kind=permission
|question|auth``, ``app=…``, colon-separated) about eleven times per turn; Claude and others
set OSC 9;4 progress; any program may raise a desktop notification with OSC 9, OSC 99 (kitty)
or OSC 777 ``notify;title;body``. A shell prompt mark (OSC 133;A) clears a status, as the
protocol says. The screen hands every such OSC here; the session stamps the time it saw them
and ``signals.combine`` decides where they stand.
"""

from __future__ import annotations

import re
from collections import deque
from dataclasses import dataclass

from .states import State

#: OSC codes this module reads (the screen passes these on, and draws nothing for them).
CODES = frozenset({"7501", "9", "99", "777", "133"})
#: OSC 7501 states → Panewatch states (``clear`` removes the status).
STATUS_STATES = {
    "working": State.working,
    "blocked": State.blocked,
    "done": State.idle,
    "idle": State.idle,
    "error": State.idle,
}
NOTIFICATIONS_KEPT = 20
#: Longest OSC string kept while waiting for its terminator (what ``screen.py`` keeps, too).
OSC_KEEP = 4096
#: One complete OSC string of a code this module reads: ``ESC ] code ; arg`` then BEL or ST.
_OSC = re.compile(rb"\x1b\](7501|9|99|777|133);([^\x07\x1b]{0,%d})(?:\x07|\x1b\\)" % OSC_KEEP)
#: The start of an OSC string that may still be one of ours when the rest arrives.
_OPEN = re.compile(rb"\x1b(?:\](?:[0-9]{0,4}(?:;[^\x07\x1b]*)?)?)?\Z")


@dataclass(frozen=True)
class Status:
    """An agent's own statement of its state (OSC 7501)."""

    state: State  # working, blocked or idle
    raw: str  # the protocol's word: working, blocked, done, idle, error
    kind: str = ""  # permission, question, auth (for blocked)
    app: str = ""


@dataclass(frozen=True)
class Notification:
    """A desktop notification the agent asked the terminal to show."""

    protocol: str  # "osc9", "osc99", "osc777"
    title: str
    body: str


@dataclass(frozen=True)
class Progress:
    """OSC 9;4: 0 none, 1 value, 2 error, 3 indeterminate (busy), 4 paused."""

    state: int
    value: int


class OutOfBand:
    """The latest status and progress, and the last notifications; ``seq`` moves on each change."""

    def __init__(self) -> None:
        self.status: Status | None = None
        self.progress: Progress | None = None
        self.notifications: deque[Notification] = deque(maxlen=NOTIFICATIONS_KEPT)
        self.notified = 0  # notifications seen in all (the deque keeps the last few)
        self.seq = 0

    def feed(self, code: str, arg: str) -> None:
        """One OSC string (``code;arg``); anything malformed is ignored, never raised."""
        if code == "7501":
            self._status(arg)
        elif code == "9":
            if arg.startswith("4;") or arg == "4":
                parts = arg.split(";")
                try:
                    state = int(parts[1]) if len(parts) > 1 and parts[1] else 0
                    value = int(parts[2]) if len(parts) > 2 and parts[2] else 0
                except ValueError:
                    return
                self.progress = None if state == 0 else Progress(state, max(0, min(100, value)))
                self.seq += 1
            elif arg and not arg[0].isdigit():  # OSC 9;<n>;… are ConEmu commands, not messages
                self._notify("osc9", "", arg)
        elif code == "99":
            meta, _, payload = arg.partition(";")
            title = "title" if "p=title" in meta else ""
            self._notify("osc99", payload if title else "", "" if title else payload)
        elif code == "777":
            parts = arg.split(";", 2)
            if parts[0] == "notify":
                self._notify("osc777", parts[1] if len(parts) > 1 else "", parts[2] if len(parts) > 2 else "")
        elif code == "133" and arg.startswith("A") and self.status is not None:
            self.status = None  # a shell prompt: the program that set the status is gone
            self.seq += 1

    def _status(self, arg: str) -> None:
        if arg == "?":
            return
        fields = dict(part.partition("=")[::2] for part in arg.replace(";", ":").split(":") if "=" in part)
        raw = fields.get("state", "")
        if raw == "clear":
            self.status = None
        elif raw in STATUS_STATES:
            self.status = Status(STATUS_STATES[raw], raw, fields.get("kind", ""), fields.get("app", ""))
        else:
            return
        self.seq += 1

    def _notify(self, protocol: str, title: str, body: str) -> None:
        self.notifications.append(Notification(protocol, title[:200], body[:500]))
        self.notified += 1
        self.seq += 1


class OscTap:
    """Finds the out-of-band OSC strings in raw pane bytes, for an emulator that does not hand
    them over (libghostty-vt keeps titles but drops OSC 7501 and gives no hook for 9/99/777).

    A string split across reads is carried (its first ``OSC_KEEP`` bytes; the rest of a longer
    one is skipped up to its terminator, as ``screen.py`` does), so the cost per read stays
    linear in the bytes read.
    """

    def __init__(self, oob: OutOfBand) -> None:
        self.oob = oob
        self._carry = b""  # an open OSC string, at most OSC_KEEP bytes
        self._overlong = False  # the open string went past OSC_KEEP: the rest is skipped

    def feed(self, data: bytes) -> None:
        """Scan one read; cheap when it has no ``ESC`` (the caller may skip it then)."""
        if self._overlong:  # like screen.py: keep the first OSC_KEEP bytes, act at the terminator
            stop = min((i for i in (data.find(b"\x07"), data.find(b"\x1b")) if i >= 0), default=-1)
            if stop < 0:
                return
            self._overlong, head, self._carry = False, self._carry, b""
            self.feed(head + b"\x07")
            data = data[stop + (1 if data[stop] == 7 else 0) :]
        if self._carry:
            data, self._carry = self._carry + data, b""
        if b"\x1b" not in data:
            return
        end = 0
        for m in _OSC.finditer(data):
            self.oob.feed(m[1].decode(), m[2].decode("utf-8", "replace"))
            end = m.end()
        start = data.rfind(b"\x1b", end, len(data))
        if start >= 0 and _OPEN.match(data, start):
            self._carry = data[start : start + 2 + OSC_KEEP]  # ESC ] and what screen.py keeps
            self._overlong = len(data) - start > len(self._carry)

    @property
    def pending(self) -> bool:
        """An OSC string is open: the next read must be scanned even without an ``ESC``."""
        return bool(self._carry)
