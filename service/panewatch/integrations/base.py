"""The shape of an agent integration, and the one report format every agent may send."""

from __future__ import annotations

import os
from collections.abc import Mapping, MutableMapping, Sequence
from typing import Any, Protocol

from ..errors import InvalidRequest
from ..signals import Report
from ..states import RULE_STATES, State


class UnknownPayload(InvalidRequest):
    """Neither a hook payload the integration knows nor a ``{"state": ...}`` report."""


class Integration(Protocol):
    name: str

    def launch_args(self, argv: Sequence[str], processes: Sequence[str], env: Mapping[str, str]) -> list[str]:
        """Arguments to add to ``argv`` (whose program is one of the manifest's ``processes``);
        ``env`` is the agent's environment (its session id, the report endpoints)."""

    def launch_env(self, argv: Sequence[str], processes: Sequence[str], env: Mapping[str, str]) -> dict[str, str]:
        """Variables to add to the agent's environment ``env`` (Gemini CLI takes its hooks from a
        settings folder named by a variable; the others need none)."""

    def interpret(self, payload: Mapping[str, Any], now: float, memo: MutableMapping[str, Any]) -> Report | None:
        """The report a hook payload makes (None: not about the pane's state, ignore it).
        ``memo`` is this session's own scratch space for rules that span payloads."""


def plain_report(payload: Mapping[str, Any], now: float) -> Report:
    """``{"state": "blocked"|"working"|"idle", "detail": ...}`` from any tool or script."""
    state = payload["state"]
    if state not in RULE_STATES:
        raise UnknownPayload(f"state must be blocked, working or idle, not {state!r}")
    detail = str(payload.get("detail") or payload.get("message") or "")[:200]
    return Report(State(state), "report", now, detail)


def is_plain(payload: Mapping[str, Any]) -> bool:
    return "state" in payload and "hook_event_name" not in payload


def runs_directly(argv: Sequence[str], processes: Sequence[str]) -> bool:
    """Whether ``argv`` starts the agent itself (a wrapper script may not take its flags)."""
    return bool(argv) and os.path.basename(argv[0]) in processes


def event_report(
    payload: Mapping[str, Any], now: float, states: Mapping[str, State | None], what: str
) -> tuple[Report | None, str]:
    """(report or None, event name) for a hook payload whose ``hook_event_name`` maps to a state in
    ``states`` (None, or not there: not about the pane's state); ``what`` names the agent in the
    refusal of a payload that is not one. Events of a subagent (``agent_id``) say nothing about the
    pane's own prompt and are ignored."""
    if is_plain(payload):
        return plain_report(payload, now), "report"
    event = payload.get("hook_event_name")
    if not isinstance(event, str) or not event:
        raise UnknownPayload(f'expected a {what} hook payload (hook_event_name) or {{"state": ...}}')
    state = states.get(event)
    if state is None or payload.get("agent_id"):
        return None, event
    tool = payload.get("tool_name")
    return Report(state, event, now, f"{event} {tool}" if isinstance(tool, str) and tool else event), event
