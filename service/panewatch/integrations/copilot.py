"""GitHub Copilot CLI: the hooks Panewatch adds when it launches the CLI, and what each hook means.

Copilot CLI (1.0.102) takes hooks from policy files, the user's ``~/.copilot`` (``hooks/*.json``,
``settings.json``), the project's ``.github/hooks/*.json`` and from plugins, and runs the entries
of every source. ``--plugin-dir DIR`` loads a plugin from a folder for that launch only (nothing is
recorded in the user's files: checked), so the launch adds ``--plugin-dir`` naming a private
folder of Panewatch's own holding a ``plugin.json`` and its ``hooks.json``. The user's files are
never written and the user's own hooks keep running. ``COPILOT_HOME`` is not used: Copilot
rewrites ``config.json`` (login, trusted folders) by replacing the file, and keeps its session
history there, so an overlay would lose both.

Copilot's payloads mostly do not name their event, and nest the tool's input under ``toolInput``,
so each hook's command adds ``"copilot_event"`` in front and renames the top-level ``toolInput``
to ``tool_input`` (the one nested value the service keeps of a report) with ``sed``, then ``curl``s
the payload to the pane's report socket as Claude's hooks do.
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
from ..panes.asks import from_tool
from ..panes.signals import Report
from ..states import RequestSource, State
from .base import UnknownPayload, is_plain, plain_report, private_temp_folder, runs_directly

log = logging.getLogger("panewatch.integrations")

#: What each subscribed event means (``notification`` only when its type is a prompt).
COPILOT_EVENTS: dict[str, State | None] = {
    "userPromptSubmitted": State.working,
    "preToolUse": State.working,
    "postToolUse": State.working,
    "permissionRequest": State.blocked,
    "notification": None,
    "agentStop": State.idle,
}
#: Notification types that mean a prompt waits for the user.
BLOCKING_NOTIFICATIONS = {"permission_prompt", "elicitation_dialog"}
#: A permission notification this soon after a permissionRequest repeats that prompt.
REDUNDANT_NOTIFICATION_S = 60.0
#: Seconds Copilot waits for a hook (curl gives up after 2 s).
HOOK_TIMEOUT_S = 5


def hook_command(event: str) -> str:
    """The shell command of one hook: the payload with its event named, to the report socket."""
    edit = f'1s/^{{/{{"copilot_event":"{event}",/; 1s/"toolInput":/"tool_input":/'
    return f"sed -e '{edit}' | {REPORT_COMMAND}"


def plugin_files() -> dict[str, str]:
    """The plugin's two files: its manifest and its hooks (one per event)."""
    hooks = {
        event: [{"type": "command", "bash": hook_command(event), "timeoutSec": HOOK_TIMEOUT_S}]
        for event in COPILOT_EVENTS
    }
    manifest = {
        "name": "panewatch",
        "description": "Panewatch state reports",
        "version": "1.0.0",
        "hooks": "hooks.json",
    }
    return {
        "plugin.json": json.dumps(manifest, indent=2),
        "hooks.json": json.dumps({"version": 1, "hooks": hooks}, indent=2),
    }


def plugin_dir(base: Path) -> Path:
    """The plugin's folder under ``base``, named by its files' text."""
    files = plugin_files()
    digest = hashlib.sha256(json.dumps(files, sort_keys=True).encode()).hexdigest()[:16]
    folder = base / digest
    folder.mkdir(mode=0o700, exist_ok=True)
    for name, text in files.items():
        target = folder / name
        if not target.exists() or target.read_text() != text:
            scratch = folder / f".{name}.{os.getpid()}.tmp"
            scratch.write_text(text)
            scratch.replace(target)
    return folder


class CopilotIntegration:
    """Copilot CLI's hooks (a ``--plugin-dir`` plugin of Panewatch's own) and its payloads."""

    name = "copilot"

    def launch_args(self, argv: Sequence[str], processes: Sequence[str], env: Mapping[str, str]) -> list[str]:
        if not runs_directly(argv, processes):
            return []  # a wrapper script: it may not take --plugin-dir
        base = private_temp_folder("copilot", "Copilot CLI")
        try:
            folder = plugin_dir(base) if base else None
        except OSError as exc:
            log.warning("no Copilot CLI hooks: writing the plugin failed (%s)", exc)
            folder = None
        return ["--plugin-dir", str(folder)] if folder else []

    def launch_env(self, argv: Sequence[str], processes: Sequence[str], env: Mapping[str, str]) -> dict[str, str]:
        return {}

    def interpret(self, payload: Mapping[str, Any], now: float, memo: MutableMapping[str, Any]) -> Report | None:
        if is_plain(payload):
            return plain_report(payload, now)
        event = payload.get("copilot_event")
        if not isinstance(event, str) or event not in COPILOT_EVENTS:
            raise UnknownPayload('expected a Copilot CLI hook payload ("copilot_event") or {"state": ...}')
        tool = payload.get("toolName")
        tool = tool if isinstance(tool, str) and tool else None
        if event == "permissionRequest":
            memo["permission_requested_at"] = now
            given = payload.get("tool_input")
            request = from_tool(tool, given if isinstance(given, Mapping) else None, RequestSource.hook)
            return Report(State.blocked, event, now, f"asks permission to use {tool or 'a tool'}", request)
        if event == "notification":
            return _notification(payload, now, memo)
        state = COPILOT_EVENTS[event]
        assert state is not None  # every other subscribed event says a state
        return Report(state, event, now, f"{event} {tool}" if tool else event)


def _notification(payload: Mapping[str, Any], now: float, memo: MutableMapping[str, Any]) -> Report | None:
    """A prompt notification is blocked, unless it repeats the permissionRequest just reported
    (it can only arrive late, after an answer, and lie); other notifications (a shell finished,
    the agent idle) come asynchronously and say nothing sure about the pane: ignored."""
    kind = str(payload.get("notification_type") or "")
    if kind not in BLOCKING_NOTIFICATIONS:
        return None
    asked = memo.get("permission_requested_at")
    if kind == "permission_prompt" and asked is not None and now - asked < REDUNDANT_NOTIFICATION_S:
        return None
    message = str(payload.get("message") or kind)[:200]
    return Report(State.blocked, f"notification:{kind}", now, message)
