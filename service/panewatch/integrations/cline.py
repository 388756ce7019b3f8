"""Cline CLI: the hooks Panewatch adds when it launches the CLI, and what each hook means.

Cline (3.0.65) runs every regular file named for a hook event (``PreToolUse``, ``TaskStart.sh``,
``taskcomplete.py`` …) in its hooks folders, with the event's JSON on stdin: ``~/Documents/Cline/
Hooks``, ``$CLINE_DIR/hooks`` (default ``~/.cline/hooks``) and the workspace's. ``--hooks-dir``
only sets ``CLINE_HOOKS_DIR``, which 3.0.65 never reads (checked: a hook there never ran), and a
symbolic link in a hooks folder is skipped. So the launch points ``CLINE_DIR`` at an overlay: a
folder whose entries are symbolic links to the user's own (``data`` — login, settings, sessions —
``tasks``, ``cron`` …: read and written where they always are) except ``hooks``, a folder of
Panewatch's own holding one report hook per event and, for each hook file of the user's, a small
script of the same name that runs theirs as Cline would (its ``#!`` line, else its extension), so
the user's hooks keep running. The user's files are never written; Cline makes ``data``,
``tasks`` and ``cron`` in the user's folder on a first run anyway, so the launch makes them there
first (a folder Cline makes for the first time during such a session lands in the overlay).

The hooks run as children of the TUI (checked), so each ``curl``s its payload to the pane's report
socket as Claude's do. Cline 3.0.65 has no permission event (its events are ``TaskStart``,
``TaskResume``, ``UserPromptSubmit``, ``PreToolUse``, ``PostToolUse``, ``PreCompact``,
``TaskComplete``, ``TaskCancel``, ``TaskError``, ``SessionShutdown``), and ``PreToolUse`` comes
before its approval box: a waiting tool call is read from the screen only.
"""

from __future__ import annotations

import hashlib
import logging
import os
import shlex
from collections.abc import Mapping, MutableMapping, Sequence
from pathlib import Path
from typing import Any

from ..access.report_socket import REPORT_COMMAND
from ..panes.signals import Report
from ..states import State
from .base import UnknownPayload, is_plain, plain_report, private_temp_folder, runs_directly, switches_user

log = logging.getLogger("panewatch.integrations")

#: Each event's hook-file name and what it means. ``SessionShutdown`` is what Esc mid-turn sends
#: (3.0.65 sent no ``TaskCancel`` then); ``PreCompact`` says no state.
CLINE_EVENTS: dict[str, State | None] = {
    "TaskStart": State.working,
    "TaskResume": State.working,
    "UserPromptSubmit": State.working,
    "PreToolUse": State.working,
    "PostToolUse": State.working,
    "PreCompact": None,
    "TaskComplete": State.idle,
    "TaskCancel": State.idle,
    "TaskError": State.idle,
    "SessionShutdown": State.idle,
}
#: The payload's ``hookName`` for each event (Cline's internal names).
HOOK_NAMES: dict[str, str] = {
    "agent_start": "TaskStart",
    "agent_resume": "TaskResume",
    "prompt_submit": "UserPromptSubmit",
    "tool_call": "PreToolUse",
    "tool_result": "PostToolUse",
    "agent_end": "TaskComplete",
    "agent_abort": "TaskCancel",
    "agent_error": "TaskError",
    "session_shutdown": "SessionShutdown",
}
#: The extensions Cline takes for a hook file, and how it runs a file without a ``#!`` line.
EXTENSIONS: dict[str, list[str]] = {
    "": ["bash"],
    ".sh": ["bash"],
    ".bash": ["bash"],
    ".zsh": ["bash"],
    ".js": ["node"],
    ".mjs": ["node"],
    ".cjs": ["node"],
    ".ts": ["bun", "run"],
    ".mts": ["bun", "run"],
    ".cts": ["bun", "run"],
    ".py": ["python3"],
    ".ps1": ["pwsh", "-File"],
}
#: What Cline makes in its folder on a first run (made in the user's folder first, then linked).
FIRST_RUN = ("data", "tasks", "cron")


def hook_event(name: str) -> str | None:
    """The event a file name in a hooks folder is for, as Cline reads it (None: not a hook)."""
    stem, ext = os.path.splitext(name)
    if ext.lower() not in EXTENSIONS:
        return None
    return next((event for event in CLINE_EVENTS if event.lower() == stem.strip().lower()), None)


def runner(path: Path) -> list[str]:
    """How Cline runs the hook file ``path``: its ``#!`` words (``env`` dropped), else by extension."""
    try:
        with path.open(encoding="utf-8", errors="replace") as handle:
            first = handle.readline().strip()
    except OSError:
        first = ""
    words = first[2:].split() if first.startswith("#!") else []
    while words and os.path.basename(words[0]).lower() == "env":
        words = words[1:]
    if words:
        return [*words, str(path)]
    return [*EXTENSIONS.get(os.path.splitext(path.name)[1].lower(), ["bash"]), str(path)]


def user_hooks(folder: Path) -> dict[str, Path]:
    """The user's hook files in ``folder`` by name (regular files only: Cline skips links)."""
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return {}
    return {e.name: Path(e.path) for e in entries if e.is_file(follow_symlinks=False) and hook_event(e.name)}


def hook_files(theirs: Mapping[str, Path]) -> dict[str, str]:
    """The overlay's hooks folder: a runner of each of the user's hooks under its own name, and a
    report hook per event under the first name for that event the user's do not take."""
    files = {name: f"#!/bin/sh\nexec {shlex.join(runner(path))}\n" for name, path in sorted(theirs.items())}
    taken = {name.lower() for name in theirs}
    for event in CLINE_EVENTS:
        name = next((event + ext for ext in EXTENSIONS if (event + ext).lower() not in taken), None)
        if name is not None:
            files[name] = f"#!/bin/sh\n{REPORT_COMMAND}\n"
    return files


def _write(path: Path, text: str) -> None:
    if path.is_file() and not path.is_symlink() and path.read_text() == text:
        return
    scratch = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    scratch.write_text(text)
    scratch.chmod(0o700)
    scratch.replace(path)


def overlay_dir(real: Path, base: Path) -> Path:
    """A folder to give as ``CLINE_DIR``: links to ``real``'s entries, and a hooks folder of ours."""
    files = hook_files(user_hooks(real / "hooks"))
    text = "\0".join(f"{name}\0{body}" for name, body in sorted(files.items()))
    folder = base / hashlib.sha256(f"{real}\0{text}".encode()).hexdigest()[:16]
    hooks = folder / "hooks"
    hooks.mkdir(parents=True, exist_ok=True)
    for name in FIRST_RUN:
        (real / name).mkdir(parents=True, exist_ok=True)
    for entry in sorted(os.listdir(real)):
        link = folder / entry
        if entry != "hooks" and not link.is_symlink() and not link.exists():
            link.symlink_to(real / entry)
    for name, body in files.items():
        _write(hooks / name, body)
    return folder


def _uses_config_flag(argv: Sequence[str]) -> bool:
    return any(word == "--config" or word.startswith("--config=") for word in argv)


class ClineIntegration:
    """Cline CLI's hooks (through an overlay ``CLINE_DIR``) and its hook payloads."""

    name = "cline"

    def launch_args(self, argv: Sequence[str], processes: Sequence[str], env: Mapping[str, str]) -> list[str]:
        return []

    def launch_env(self, argv: Sequence[str], processes: Sequence[str], env: Mapping[str, str]) -> dict[str, str]:
        if not runs_directly(argv, processes) or switches_user(argv):
            return {}  # another user's Cline reads its own home, which this overlay is not
        if _uses_config_flag(argv):
            log.info("no Cline hooks: --config names Cline's folder, which CLINE_DIR cannot replace")
            return {}
        home = env.get("HOME") or os.path.expanduser("~")
        real = Path(env.get("CLINE_DIR") or Path(home) / ".cline")
        base = private_temp_folder("cline", "Cline")
        try:
            overlay = overlay_dir(real, base) if base else None
        except OSError as exc:
            log.warning("no Cline hooks: the overlay of %s failed (%s)", real, exc)
            overlay = None
        return {"CLINE_DIR": str(overlay)} if overlay else {}

    def interpret(self, payload: Mapping[str, Any], now: float, memo: MutableMapping[str, Any]) -> Report | None:
        if is_plain(payload):
            return plain_report(payload, now)
        name = payload.get("hookName")
        event = HOOK_NAMES.get(name) if isinstance(name, str) else None
        if event is None:
            raise UnknownPayload('expected a Cline hook payload (hookName) or {"state": ...}')
        state = CLINE_EVENTS.get(event)
        if state is None or payload.get("parent_agent_id"):
            return None  # a subagent's event says nothing about the pane's own prompt
        # the tool's name and input are nested (tool_call, preToolUse), which the service drops
        # from every report (access.validation.clean_report): the event is all there is
        return Report(state, event, now, event)
