"""Codex CLI: the hooks Panewatch adds when it launches the CLI, and what each hook means.

Codex (0.124+) reads hooks from every config layer, ``-c`` overrides included (its "session
flags" layer), so they are given as ``-c hooks.<Event>=[...]`` for that launch only: the user's
``~/.codex`` is not touched and the user's own hooks keep running. Codex runs a non-managed hook
only once its exact definition is trusted; the trust record (``hooks.state.<key>.trusted_hash``)
is read from the same user-controlled layers, so the launch trusts exactly these hooks with one
more ``-c`` and nothing else (``--dangerously-bypass-hook-trust`` would trust every hook of the
user and of the project too). The hash is Codex's own: sha256 of the canonical JSON of the
normalized hook (checked against ``codex app-server``'s ``hooks/list`` for 0.171.0 and by the live
test, which fails if a later Codex hashes differently and so silently skips the hooks).

Each hook ``curl``s its payload to the pane's report socket (``report_socket.REPORT_COMMAND``);
payloads are Claude-shaped: ``hook_event_name``, ``session_id`` (the thread ``codex resume``
takes), ``tool_name``.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping, MutableMapping, Sequence
from typing import Any

from ..access.report_socket import REPORT_COMMAND
from ..panes.signals import Report
from ..states import State
from .base import event_report, runs_directly

#: What each subscribed event means for the pane (Interrupt: the user pressed Esc mid-turn).
#: SessionStart says no state (it can come before the composer is drawn, which is start-up, not
#: idle); it is there for its ``session_id``, the conversation a resume reopens.
CODEX_EVENTS: dict[str, State | None] = {
    "SessionStart": None,
    "UserPromptSubmit": State.working,
    "PreToolUse": State.working,
    "PermissionRequest": State.blocked,
    "PostToolUse": State.working,
    "Stop": State.idle,
    "Interrupt": State.idle,
}
#: Seconds Codex waits for a hook (curl gives up after 2 s); Codex clamps Interrupt hooks to 3 s and
#: hashes the clamped value, so 3 keeps every hook's trust hash what this module computes.
HOOK_TIMEOUT_S = 3
#: Where Codex files hooks given with ``-c`` (the key its trust records use).
SESSION_FLAGS_SOURCE = "/<session-flags>/config.toml"


def event_label(event: str) -> str:
    """Codex's snake_case label of a hook event: ``PreToolUse`` → ``pre_tool_use``."""
    return re.sub(r"(?<!^)(?=[A-Z])", "_", event).lower()


def _handler() -> dict[str, Any]:
    return {"type": "command", "command": REPORT_COMMAND, "timeout": HOOK_TIMEOUT_S}


def trusted_hash(event: str) -> str:
    """The hash Codex trusts this hook by: sha256 over the sorted, compact JSON of the normalized
    hook (event label, no matcher, the handler with its timeout and ``async = false``)."""
    identity = {"event_name": event_label(event), "hooks": [{**_handler(), "async": False}]}
    canonical = json.dumps(identity, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return "sha256:" + hashlib.sha256(canonical.encode()).hexdigest()


def _toml(value: Any) -> str:
    """An inline TOML value (JSON's string escapes are TOML basic-string escapes)."""
    if isinstance(value, dict):
        return "{" + ",".join(f"{json.dumps(k)}={_toml(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ",".join(_toml(v) for v in value) + "]"
    if isinstance(value, bool):
        return "true" if value else "false"
    return json.dumps(value)


def codex_overrides() -> list[str]:
    """``-c`` arguments: one hook per event, and the trust of exactly those hooks."""
    args: list[str] = []
    state: dict[str, Any] = {}
    for event in CODEX_EVENTS:
        args += ["-c", f"hooks.{event}={_toml([{'hooks': [_handler()]}])}"]
        state[f"{SESSION_FLAGS_SOURCE}:{event_label(event)}:0:0"] = {"trusted_hash": trusted_hash(event)}
    return [*args, "-c", f"hooks.state={_toml(state)}"]


class CodexIntegration:
    """Codex CLI's ``-c`` hooks and its hook payloads."""

    name = "codex"

    def launch_args(self, argv: Sequence[str], processes: Sequence[str], env: Mapping[str, str]) -> list[str]:
        return codex_overrides() if runs_directly(argv, processes) else []

    def launch_env(self, argv: Sequence[str], processes: Sequence[str], env: Mapping[str, str]) -> dict[str, str]:
        return {}

    def interpret(self, payload: Mapping[str, Any], now: float, memo: MutableMapping[str, Any]) -> Report | None:
        report, _event = event_report(payload, now, CODEX_EVENTS, "Codex CLI")
        return report
