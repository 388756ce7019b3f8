"""Gemini CLI: the hooks Panewatch adds when it launches the CLI, and what each hook means.

Gemini CLI (0.61.0) takes hooks only from settings files and has no per-run settings flag. Its
system layers (``GEMINI_CLI_SYSTEM_DEFAULTS_PATH`` …) are skipped unless the file and every folder
above it are owned by root, so an ordinary user cannot use them. What it does honour is
``GEMINI_CLI_HOME`` (the folder holding ``.gemini``), so the launch points that at an overlay:
a ``.gemini`` folder whose entries are symbolic links to the user's own (login, trusted folders,
history, chats, extensions: read and written where they always are) except ``settings.json``,
which is the user's settings with Panewatch's hooks appended to theirs. The user's files are never
written. Said in the README: a setting changed from inside such a session is written to the
overlay's copy and not kept, and a file Gemini creates for the first time in ``~/.gemini`` during
such a session lands in the overlay unless it is one of the names linked ahead (``LINKED_AHEAD``).

Hooks run only in a trusted folder (Gemini's rule for settings hooks) and only while the user's
``hooksConfig.enabled`` is not false. Each hook ``curl``s its payload to the pane's report socket.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from collections.abc import Mapping, MutableMapping, Sequence
from pathlib import Path
from typing import Any

from ..access.report_socket import REPORT_COMMAND
from ..panes.asks import Request, from_tool
from ..panes.signals import Report
from ..sinks.notify import clean
from ..states import RequestSource, State
from .base import event_report, merged_hooks, private_temp_folder, runs_directly, switches_user

log = logging.getLogger("panewatch.integrations")

#: What each subscribed event means (BeforeModel/AfterModel carry the whole conversation: not used).
#: SessionStart comes before the input box is drawn (start-up, not idle): kept for its
#: ``session_id``, the chat ``gemini --resume`` reopens, but it says no state.
GEMINI_EVENTS: dict[str, State | None] = {
    "SessionStart": None,
    "BeforeAgent": State.working,
    "BeforeTool": State.working,
    "AfterTool": State.working,
    "AfterAgent": State.idle,
}
#: Notification types that mean a prompt waits for the user.
BLOCKING_NOTIFICATIONS = {"ToolPermission"}
#: The edit confirmations' titles (``details.title``, 0.61.0) by tool: both are of type "edit".
EDIT_TITLES = {"Confirm Write:": "write_file", "Confirm Edit:": "replace"}
#: Milliseconds Gemini waits for a hook (curl gives up after 2 s).
HOOK_TIMEOUT_MS = 5000
#: Files Gemini may create in ``~/.gemini`` later: linked even before they exist, so that a first
#: login or a first trusted folder is written to the user's own file.
LINKED_AHEAD = (
    "oauth_creds.json",
    "google_accounts.json",
    "installation_id",
    "user_id",
    "trustedFolders.json",
    "projects.json",
    "state.json",
    "mcp-oauth-tokens.json",
)


def gemini_hooks() -> dict[str, list[dict[str, Any]]]:
    """One reporting hook per event, Notification included (its type says whether it blocks)."""
    hook = {"type": "command", "command": REPORT_COMMAND, "timeout": HOOK_TIMEOUT_MS, "name": "panewatch"}
    return {event: [{"matcher": "*", "hooks": [hook]}] for event in (*GEMINI_EVENTS, "Notification")}


def with_hooks(settings: dict[str, Any]) -> dict[str, Any]:
    """The user's settings with Panewatch's hooks after theirs (their hooks keep running)."""
    return merged_hooks(settings, gemini_hooks())


def private_base() -> Path | None:
    """This user's folder for overlays, under the temp folder, refused if anyone else owns it."""
    return private_temp_folder("gemini", "Gemini")


def overlay_home(real: Path, base: Path) -> Path | None:
    """A folder to give as ``GEMINI_CLI_HOME``: ``.gemini`` links to ``real``'s entries, and the
    user's settings with the hooks. None (no hooks, the launch goes on) when the user's settings
    cannot be read as JSON."""
    source = real / "settings.json"
    try:
        settings = json.loads(source.read_text()) if source.exists() else {}
    except (OSError, ValueError) as exc:
        log.warning("no Gemini hooks: %s is not readable JSON (%s)", source, exc)
        return None
    if not isinstance(settings, dict):
        return None
    text = json.dumps(with_hooks(settings), indent=2)
    digest = hashlib.sha256(f"{real}\0{text}".encode()).hexdigest()[:16]
    home = base / digest
    folder = home / ".gemini"
    folder.mkdir(parents=True, exist_ok=True)
    real.mkdir(parents=True, exist_ok=True)  # what Gemini makes on a first run anyway
    names = {entry.name for entry in real.iterdir()} | set(LINKED_AHEAD)
    for name in sorted(names - {"settings.json"}):
        link = folder / name
        if not link.is_symlink() and not link.exists():
            link.symlink_to(real / name)
    target = folder / "settings.json"
    if not target.exists() or target.read_text() != text:
        scratch = folder / f".settings.{os.getpid()}.tmp"
        scratch.write_text(text)
        scratch.replace(target)
    return home


class GeminiIntegration:
    """Gemini CLI's settings hooks (through an overlay ``GEMINI_CLI_HOME``) and its hook payloads."""

    name = "gemini"

    def launch_args(self, argv: Sequence[str], processes: Sequence[str], env: Mapping[str, str]) -> list[str]:
        return []

    def launch_env(self, argv: Sequence[str], processes: Sequence[str], env: Mapping[str, str]) -> dict[str, str]:
        if not runs_directly(argv, processes) or switches_user(argv):
            return {}  # another user's Gemini reads its own home, which this overlay is not
        home = env.get("GEMINI_CLI_HOME") or env.get("HOME") or os.path.expanduser("~")
        base = private_base()
        try:
            overlay = overlay_home(Path(home) / ".gemini", base) if base else None
        except OSError as exc:
            log.warning("no Gemini hooks: the overlay of %s failed (%s)", home, exc)
            overlay = None
        return {"GEMINI_CLI_HOME": str(overlay)} if overlay else {}

    def interpret(self, payload: Mapping[str, Any], now: float, memo: MutableMapping[str, Any]) -> Report | None:
        if payload.get("hook_event_name") == "Notification":
            kind = str(payload.get("notification_type") or "")
            if kind not in BLOCKING_NOTIFICATIONS:
                return None
            message = str(payload.get("message") or kind)[:200]
            return Report(State.blocked, f"Notification:{kind}", now, message, permission_request(payload, message))
        report, _event = event_report(payload, now, GEMINI_EVENTS, "Gemini CLI")
        return report


def permission_request(payload: Mapping[str, Any], message: str) -> Request:
    """What a ToolPermission notification asks: its ``details`` are the confirmation's own (a shell
    command, or the file an edit or a write touches, made relative to ``cwd`` as the dialog shows
    it); a kind it does not describe (MCP, info) says only the message."""
    details = payload.get("details")
    details = details if isinstance(details, Mapping) else {}
    kind, title = details.get("type"), str(details.get("title") or "")
    if kind == "exec" and isinstance(details.get("command"), str):
        return from_tool("run_shell_command", {"command": details["command"]}, RequestSource.hook)
    if kind == "edit" and isinstance(details.get("filePath"), str):
        path, cwd = details["filePath"], payload.get("cwd")
        if isinstance(cwd, str) and cwd and os.path.isabs(path) and Path(path).is_relative_to(cwd):
            path = os.path.relpath(path, cwd)
        tool = next((name for prefix, name in EDIT_TITLES.items() if title.startswith(prefix)), None)
        return from_tool(tool, {"file_path": path}, RequestSource.hook)
    return Request(clean(message, 200), RequestSource.hook)
