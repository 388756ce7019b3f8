"""The shape of an agent integration, and the one report format every agent may send."""

from __future__ import annotations

import logging
import os
import tempfile
from collections.abc import Mapping, MutableMapping, Sequence
from pathlib import Path
from typing import Any, Protocol

from ..errors import InvalidRequest
from ..panes.asks import from_permission
from ..panes.signals import Report
from ..procs.wrappers import split_launch
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


def agent_program(argv: Sequence[str], processes: Sequence[str]) -> str | None:
    """The agent's program word when ``argv`` starts the agent itself, directly or behind known
    wrappers (``sudo -u agent --``, ``env A=1``: arguments added at the end are still the
    agent's); None for anything else (a wrapper script, ``bash -c``: it may not take the flags)."""
    launch = split_launch(argv)
    return launch.agent[0] if launch.agent and launch.program in processes else None


def runs_directly(argv: Sequence[str], processes: Sequence[str]) -> bool:
    """Whether ``argv`` starts the agent itself (see :func:`agent_program`)."""
    return agent_program(argv, processes) is not None


def switches_user(argv: Sequence[str]) -> bool:
    """Whether a wrapper in front runs the agent as another user (whose home is not ours)."""
    return split_launch(argv).switches_user


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
    detail = f"{event} {tool}" if isinstance(tool, str) and tool else event
    request = from_permission(payload) if event == "PermissionRequest" else None
    return Report(state, event, now, detail, request), event


def merged_hooks(settings: Mapping[str, Any], ours: Mapping[str, list[dict[str, Any]]]) -> dict[str, Any]:
    """``settings`` with ``ours`` after the hooks it has (the user's hooks keep running first)."""
    merged = dict(settings)
    hooks = dict(merged.get("hooks") or {})
    for event, groups in ours.items():
        theirs = hooks.get(event)
        hooks[event] = [*(theirs if isinstance(theirs, list) else []), *groups]
    merged["hooks"] = hooks
    return merged


def private_temp_folder(name: str, agent: str) -> Path | None:
    """This user's ``panewatch-UID-name`` folder under the temp folder, refused (None, logged) if
    anyone else owns it, can read it, or it is a symlink: the agent's settings overlays live there."""
    base = Path(tempfile.gettempdir()) / f"panewatch-{os.getuid()}-{name}"
    try:
        base.mkdir(mode=0o700, exist_ok=True)
        info = base.lstat()
    except OSError as exc:
        logging.getLogger("panewatch.integrations").warning("no %s hooks: cannot make %s (%s)", agent, base, exc)
        return None
    if info.st_uid != os.getuid() or base.is_symlink() or not base.is_dir() or info.st_mode & 0o077:
        logging.getLogger("panewatch.integrations").warning(
            "no %s hooks: %s is not a private folder of this user", agent, base
        )
        return None
    return base
