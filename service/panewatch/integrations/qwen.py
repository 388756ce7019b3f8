"""Qwen Code: the hooks Panewatch adds when it launches the CLI, and what each hook means.

Qwen Code (0.24.4, a Gemini CLI fork) has Claude Code's hook events and payloads
(``hook_event_name``, ``session_id``, ``tool_name``; ``PermissionRequest`` while a confirmation
waits) and takes them from its settings layers. Its lowest layer, the system defaults, is a file
named by ``QWEN_CODE_SYSTEM_DEFAULTS_PATH`` (no ownership rule, unlike Gemini's system files), and
its hook lists are merged by concatenation across layers (the settings schema's ``mergeStrategy:
concat``). So the launch points that variable at a private file of Panewatch's own: the user's
defaults file if one was named, with Panewatch's hooks appended. The user's own files are never
written and the user's own hooks keep running. Each hook ``curl``s its payload to the pane's
report socket, as Claude's do.
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
from ..panes.signals import Report
from .base import merged_hooks, private_temp_folder, runs_directly
from .claude import ClaudeIntegration

log = logging.getLogger("panewatch.integrations")

#: The variable naming Qwen's system-defaults settings file.
DEFAULTS_VARIABLE = "QWEN_CODE_SYSTEM_DEFAULTS_PATH"
#: Events subscribed (Claude's names: Qwen's payloads are read as Claude's).
QWEN_HOOK_EVENTS = ("UserPromptSubmit", "PreToolUse", "PostToolUse", "PermissionRequest", "Notification", "Stop")
#: Milliseconds Qwen waits for a hook (curl gives up after 2 s).
HOOK_TIMEOUT_MS = 5000


def qwen_hooks() -> dict[str, list[dict[str, Any]]]:
    """One reporting hook per event (tool events match every tool)."""
    hook = {"type": "command", "command": REPORT_COMMAND, "timeout": HOOK_TIMEOUT_MS, "name": "panewatch"}
    out: dict[str, list[dict[str, Any]]] = {}
    for event in QWEN_HOOK_EVENTS:
        entry: dict[str, Any] = {"hooks": [hook]}
        if event in ("PreToolUse", "PostToolUse", "PermissionRequest"):
            entry["matcher"] = "*"
        out[event] = [entry]
    return out


def with_hooks(settings: dict[str, Any]) -> dict[str, Any]:
    """``settings`` with Panewatch's hooks after any it has."""
    return merged_hooks(settings, qwen_hooks())


def private_folder() -> Path | None:
    """This user's folder for the defaults files, refused if anyone else owns it or can read it."""
    return private_temp_folder("qwen", "Qwen Code")


def defaults_file(theirs: str | None, folder: Path) -> Path | None:
    """A defaults file with the hooks (the user's named one merged in); None when the user's
    file cannot be read as a JSON object (then the launch goes on without hooks)."""
    settings: Any = {}
    if theirs:
        try:
            settings = json.loads(Path(theirs).read_text())
        except (OSError, ValueError) as exc:
            log.warning("no Qwen Code hooks: %s is not readable JSON (%s)", theirs, exc)
            return None
    if not isinstance(settings, dict):
        return None
    text = json.dumps(with_hooks(settings), indent=2)
    target = folder / f"defaults-{hashlib.sha256(text.encode()).hexdigest()[:16]}.json"
    if not target.exists() or target.read_text() != text:
        scratch = folder / f".defaults.{os.getpid()}.tmp"
        scratch.write_text(text)
        scratch.replace(target)
    return target


class QwenIntegration:
    """Qwen Code's settings hooks (through a system-defaults file of its own) and its payloads."""

    name = "qwen"

    def __init__(self) -> None:
        self._claude = ClaudeIntegration()

    def launch_args(self, argv: Sequence[str], processes: Sequence[str], env: Mapping[str, str]) -> list[str]:
        return []

    def launch_env(self, argv: Sequence[str], processes: Sequence[str], env: Mapping[str, str]) -> dict[str, str]:
        if not runs_directly(argv, processes):
            return {}
        folder = private_folder()
        try:
            target = defaults_file(env.get(DEFAULTS_VARIABLE), folder) if folder else None
        except OSError as exc:
            log.warning("no Qwen Code hooks: the defaults file failed (%s)", exc)
            target = None
        return {DEFAULTS_VARIABLE: str(target)} if target else {}

    def interpret(self, payload: Mapping[str, Any], now: float, memo: MutableMapping[str, Any]) -> Report | None:
        return self._claude.interpret(payload, now, memo)
