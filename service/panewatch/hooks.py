"""Claude Code hooks: the settings Panewatch adds when it launches the CLI, and what a hook means.

The hooks are passed with ``--settings`` so they apply to that launch only and the user's own
hooks keep running (hook lists merge across settings levels). Each hook ``curl``s its JSON
payload to the service's report socket (the kernel tells which pane calls), with a short timeout and ``|| true``: a
service that is down must never break the agent.
"""

from __future__ import annotations

import json
from typing import Any

from .report_socket import REPORT_COMMAND as _REPORT_COMMAND

#: Hook events the launcher subscribes to.
CLAUDE_HOOK_EVENTS = ("UserPromptSubmit", "PreToolUse", "PostToolUse", "PermissionRequest", "Notification", "Stop")

_WORKING = {"UserPromptSubmit", "PreToolUse", "PostToolUse", "PostToolUseFailure", "PreCompact"}
_IDLE = {"Stop", "StopFailure", "SessionEnd", "SessionStart"}
_BLOCKING_NOTIFICATIONS = {"permission_prompt", "elicitation_dialog", "elicitation_url_dialog"}

#: The hook command (``report_socket``): the pane's own report socket, where the kernel names the caller.
REPORT_COMMAND = _REPORT_COMMAND


def claude_settings() -> str:
    """The inline JSON for ``claude --settings``: one reporting hook per event."""
    hook = {"type": "command", "command": REPORT_COMMAND, "timeout": 5}
    hooks: dict[str, list[dict[str, Any]]] = {}
    for event in CLAUDE_HOOK_EVENTS:
        entry: dict[str, Any] = {"hooks": [hook]}
        if event in ("PreToolUse", "PostToolUse", "PermissionRequest"):
            entry["matcher"] = "*"
        hooks[event] = [entry]
    return json.dumps({"hooks": hooks}, separators=(",", ":"))


class UnknownPayload(ValueError):
    """Neither a Claude Code hook payload nor a ``{"state": ...}`` report."""


def state_from_payload(payload: dict[str, Any]) -> tuple[str | None, str, str]:
    """(state or None to ignore, event name, detail) for a hook payload or a plain report.

    ``UserPromptSubmit``/``PreToolUse``/``PostToolUse`` mean working; ``PermissionRequest``
    and permission/elicitation notifications mean blocked; other notifications
    (``idle_prompt``...), ``Stop``, ``StopFailure`` and ``SessionEnd`` mean idle.
    Subagent events are ignored: they say nothing about the pane's own prompt.
    """
    if "state" in payload and "hook_event_name" not in payload:
        state = payload["state"]
        if state not in ("blocked", "working", "idle"):
            raise UnknownPayload(f"state must be blocked, working or idle, not {state!r}")
        detail = str(payload.get("detail") or payload.get("message") or "")[:200]
        return state, "report", detail
    event = payload.get("hook_event_name")
    if not isinstance(event, str) or not event:
        raise UnknownPayload("expected a Claude Code hook payload (hook_event_name) or {\"state\": ...}")
    if payload.get("agent_id") or event in ("SubagentStop", "SubagentStart"):
        return None, event, "subagent event"
    if event == "PermissionRequest":
        tool = payload.get("tool_name") or "a tool"
        return "blocked", event, f"asks permission to use {tool}"
    if event == "Notification":
        kind = str(payload.get("notification_type") or "")
        message = str(payload.get("message") or kind)[:200]
        return ("blocked" if kind in _BLOCKING_NOTIFICATIONS else "idle"), f"Notification:{kind or '?'}", message
    if event in _WORKING:
        tool = payload.get("tool_name")
        return "working", event, f"{event} {tool}" if tool else event
    if event in _IDLE:
        return "idle", event, event
    return None, event, "event not used for state"
