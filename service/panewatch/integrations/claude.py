"""Claude Code: the hooks Panewatch adds when it launches the CLI, and what each hook means.

The hooks are passed with ``--settings`` so they apply to that launch only and the user's own
hooks keep running (hook lists merge across settings levels). Each hook ``curl``s its payload to
the report socket (the kernel tells which pane calls), with a short timeout and ``|| true``.

When the agent's PATH has no ``curl`` and the Claude Code is one known to take native ``http``
hooks (:data:`HTTP_HOOKS_SINCE`, read from its install, never by running it), each hook is
``{"type": "http"}`` instead: Claude itself POSTs the payload to the report endpoint's loopback
port, which takes it only if a process of the named session holds the connecting socket
(``tcp_peer``), so one pane still cannot report for another. curl stays first where it is
installed, for two things measured with 2.1.332: a failed http hook (service down, e.g. a restart
under tmux) draws "stop hook problem" in Claude's footer where curl's ``|| true`` is silent;
and while the service is down its loopback port is free, so another local user could listen
there and read the payloads, which the report socket in the private state folder rules out.
Either way a service that is down never blocks the agent (``onFailure: continue``).
"""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Mapping, MutableMapping, Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any

from ..access.report_socket import REPORT_COMMAND as _REPORT_COMMAND
from ..panes.asks import from_permission
from ..panes.signals import Report
from ..states import State
from .base import UnknownPayload, agent_program, is_plain, plain_report

#: Hook events the launcher subscribes to.
CLAUDE_HOOK_EVENTS = ("UserPromptSubmit", "PreToolUse", "PostToolUse", "PermissionRequest", "Notification", "Stop")

_WORKING = {"UserPromptSubmit", "PreToolUse", "PostToolUse", "PostToolUseFailure", "PreCompact"}
_IDLE = {"Stop", "StopFailure", "SessionEnd", "SessionStart"}
_BLOCKING_NOTIFICATIONS = {"permission_prompt", "elicitation_dialog", "elicitation_url_dialog"}

#: A permission Notification this soon after a PermissionRequest repeats that prompt.
REDUNDANT_NOTIFICATION_S = 60.0

#: The hook command (``report_socket``): the pane's own report socket, where the kernel names the caller.
REPORT_COMMAND = _REPORT_COMMAND


#: The first Claude Code version checked to take ``http`` hooks and POST them from its own process
#: (older ones may have them too; unchecked ones get the curl hooks, which every version takes).
HTTP_HOOKS_SINCE = (2, 1, 332)
_VERSION = re.compile(r"^(\d+)\.(\d+)\.(\d+)$")


def http_hook(url: str, sid: str) -> dict[str, Any]:
    """A native hook posting to the loopback report endpoint, naming its session (not a secret:
    the endpoint checks which process holds the socket)."""
    return {"type": "http", "url": f"{url}?session={sid}", "timeout": 5, "onFailure": "continue"}


def claude_settings(hook: Mapping[str, Any] | None = None) -> str:
    """The inline JSON for ``claude --settings``: one reporting hook per event (curl's by default)."""
    hook = hook or {"type": "command", "command": REPORT_COMMAND, "timeout": 5}
    hooks: dict[str, list[dict[str, Any]]] = {}
    for event in CLAUDE_HOOK_EVENTS:
        entry: dict[str, Any] = {"hooks": [hook]}
        if event in ("PreToolUse", "PostToolUse", "PermissionRequest"):
            entry["matcher"] = "*"
        hooks[event] = [entry]
    return json.dumps({"hooks": hooks}, separators=(",", ":"))


def state_from_payload(payload: Mapping[str, Any]) -> tuple[State | None, str, str]:
    """(state or None to ignore, event name, detail) for a hook payload or a plain report.

    ``UserPromptSubmit``/``PreToolUse``/``PostToolUse`` mean working; ``PermissionRequest``
    and permission/elicitation notifications mean blocked; other notifications
    (``idle_prompt``...), ``Stop``, ``StopFailure`` and ``SessionEnd`` mean idle.
    Subagent events are ignored: they say nothing about the pane's own prompt.
    """
    if is_plain(payload):
        report = plain_report(payload, 0.0)
        return report.state, report.event, report.detail
    event = payload.get("hook_event_name")
    if not isinstance(event, str) or not event:
        raise UnknownPayload('expected a Claude Code hook payload (hook_event_name) or {"state": ...}')
    if payload.get("agent_id") or event in ("SubagentStop", "SubagentStart"):
        return None, event, "subagent event"
    if event == "PermissionRequest":
        tool = payload.get("tool_name") or "a tool"
        return State.blocked, event, f"asks permission to use {tool}"
    if event == "Notification":
        kind = str(payload.get("notification_type") or "")
        message = str(payload.get("message") or kind)[:200]
        state = State.blocked if kind in _BLOCKING_NOTIFICATIONS else State.idle
        return state, f"Notification:{kind or '?'}", message
    if event in _WORKING:
        tool = payload.get("tool_name")
        return State.working, event, f"{event} {tool}" if tool else event
    if event in _IDLE:
        return State.idle, event, event
    return None, event, "event not used for state"


class ClaudeIntegration:
    """Claude Code's ``--settings`` hooks and its hook payloads."""

    name = "claude"

    def launch_args(self, argv: Sequence[str], processes: Sequence[str], env: Mapping[str, str]) -> list[str]:
        program = agent_program(argv, processes)
        if program is None:
            return []  # a wrapper script: it may not take --settings
        url, sid, path = env.get("PANEWATCH_REPORT_URL"), env.get("PANEWATCH_SESSION"), env.get("PATH")
        if url and sid and shutil.which("curl", path=path) is None:
            binary = shutil.which(program, path=path) or program
            if (installed_version(binary) or (0,)) >= HTTP_HOOKS_SINCE:
                return ["--settings", claude_settings(http_hook(url, sid))]
        return ["--settings", claude_settings()]

    def launch_env(self, argv: Sequence[str], processes: Sequence[str], env: Mapping[str, str]) -> dict[str, str]:
        return {}

    def interpret(self, payload: Mapping[str, Any], now: float, memo: MutableMapping[str, Any]) -> Report | None:
        state, event, detail = state_from_payload(payload)
        if state is None:
            return None
        if event == "PermissionRequest":
            memo["permission_requested_at"] = now
            return Report(state, event, now, detail, from_permission(payload))
        elif state == State.blocked and event.startswith("Notification:"):
            asked = memo.get("permission_requested_at")
            if asked is not None and now - asked < REDUNDANT_NOTIFICATION_S:
                # Claude repeats a prompt ~6 s later as a permission Notification; when the prompt
                # was already reported, that repeat can only arrive late (after an answer) and lie
                return None
        return Report(state, event, now, detail)


def installed_version(binary: str) -> tuple[int, ...] | None:
    """The version of the Claude Code that ``binary`` starts, from its install: the npm package's
    ``package.json`` above it, or the native installer's file name (``versions/2.1.332``)."""
    try:
        real = Path(binary).resolve(strict=True)
        return _version_at(str(real), real.stat().st_mtime_ns)
    except OSError:
        return None


@lru_cache(maxsize=32)
def _version_at(real: str, _mtime: int) -> tuple[int, ...] | None:
    path = Path(real)
    if found := _VERSION.match(path.name):
        return tuple(int(part) for part in found.groups())
    for folder in list(path.parents)[:3]:
        try:
            package = json.loads((folder / "package.json").read_text())
        except (OSError, ValueError):
            continue
        if isinstance(package, dict) and package.get("name") == "@anthropic-ai/claude-code":
            found = _VERSION.match(str(package.get("version", "")))
            return tuple(int(part) for part in found.groups()) if found else None
    return None
