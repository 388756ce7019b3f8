"""One session as the engine keeps it: what was launched, its pane, its host handle, its
recording — and the launch helpers (command, environment) that turn a request into argv."""

from __future__ import annotations

import os
import secrets
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .hosts.base import PaneHandle
from .integrations import Integration
from .pane import Pane
from .transcript import Transcript

#: No variable of the server with this prefix reaches an agent (the token, the config path, the
#: webhook...): only the few its session sets.
SERVER_PREFIX = "PANEWATCH_"


@dataclass
class SessionSpec:
    """What to launch: an agent's manifest and/or an explicit command."""

    agent: str | None = None
    command: list[str] | None = None
    cwd: str | None = None
    env: dict[str, str] = field(default_factory=dict)
    rows: int = 32
    cols: int = 120
    hooks: bool = True
    name: str | None = None
    host: str | None = None  # the pane host's kind (None: the engine's default)


def expand_command(command: Sequence[str]) -> list[str]:
    """``{python}`` in a manifest's command is the interpreter running Panewatch."""
    return [sys.executable if part == "{python}" else part for part in command]


def _ci_marker(name: str) -> bool:
    """A variable that tells programs they run in CI. A pane is an interactive terminal, and TUIs
    that see one inherited from the server (Gemini CLI) refuse to be interactive; a session's own
    ``env`` may still set them."""
    return name in ("CI", "CONTINUOUS_INTEGRATION") or name.startswith("CI_")


def agent_env(base: Mapping[str, str], extra: Mapping[str, str]) -> dict[str, str]:
    """An agent's environment: the server's without any ``PANEWATCH_*`` or CI marker, a real terminal's TERM,
    then what the session sets (its id, URL, report socket, the user's ``env``)."""
    env = {k: v for k, v in base.items() if not k.startswith(SERVER_PREFIX) and not _ci_marker(k)}
    env.update({"TERM": "xterm-256color", "COLORTERM": "truecolor"})
    env.update(extra)
    return env


class Session:
    """A launched agent: its pane (screen, signals, decision) and how to reach it."""

    def __init__(
        self,
        sid: str,
        spec: SessionSpec,
        argv: list[str],
        pane: Pane,
        integration: Integration | None,
        host: str = "pty",
    ) -> None:
        self.id = sid
        self.spec = spec
        self.argv = argv
        self.pane = pane
        self.integration = integration
        self.host = host
        self.name = spec.name or spec.agent or (os.path.basename(argv[0]) if argv else sid)
        self.cwd = spec.cwd or os.getcwd()
        self.created = time.time()
        self.report_token = secrets.token_urlsafe(24)
        self.handle: PaneHandle | None = None
        self.error: str | None = None
        self.transcript: Transcript | None = None  # set when recordings are on
        self.memo: dict[str, Any] = {}  # the integration's per-session scratch space

    @property
    def writable(self) -> bool:
        return self.handle is not None and self.handle.alive

    def info(self) -> dict[str, Any]:
        """The session's JSON view (``GET /api/sessions/{id}``, events, the dashboard's cards)."""
        pane, d = self.pane, self.pane.decision
        fg = pane.fg.program
        return {
            "id": self.id,
            "kind": "acp" if self.host == "acp" else "terminal",  # how it is read: protocol or screen
            "name": self.name,
            "agent": pane.manifest_agent or pane.agent or (self.spec.agent if self.host == "acp" else None),
            "launched_agent": pane.agent,
            "command": self.argv,
            "cwd": self.cwd,
            **d.as_dict(),
            "since": d.since,
            "pid": self.handle.pid if self.handle else None,
            "host": self.host,
            "ref": self.handle.ref if self.handle else None,
            "foreground": fg.name if fg else None,
            "foreground_pid": pane.fg.pgid,
            "exit_code": pane.exit_code,
            "error": self.error or getattr(self.handle, "error", None),  # ACP: the agent's last fault
            "rows": pane.screen.rows,
            "cols": pane.screen.cols,
            "title": pane.screen.title,
            "created": self.created,
            "bytes_read": pane.bytes_read,
            "transcript": self.transcript.info() if self.transcript else None,
        }
