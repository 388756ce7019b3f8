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

from collections import deque
from dataclasses import dataclass

#: OSC codes this module reads (the screen passes these on, and draws nothing for them).
CODES = frozenset({"7501", "9", "99", "777", "133"})
#: OSC 7501 states → Panewatch states (``clear`` removes the status).
STATUS_STATES = {"working": "working", "blocked": "blocked", "done": "idle", "idle": "idle", "error": "idle"}
NOTIFICATIONS_KEPT = 20


@dataclass(frozen=True)
class Status:
    """An agent's own statement of its state (OSC 7501)."""

    state: str  # a Panewatch state: working, blocked, idle
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
