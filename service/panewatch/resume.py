"""Resuming a lost agent: its manifest's ``resume`` template and the conversation id it reported.

A pane is lost when its tmux server died (killed, machine rebooted). The agent's conversation is
not: Claude Code and Codex keep it on disk under an id their hooks report. Resuming starts the
template in the same folder under the same Panewatch session id.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

#: What an agent's own conversation id may look like: it becomes one argv element, never an option.
AGENT_SESSION_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:-]{0,127}")


class ResumeError(Exception):
    """This session cannot be resumed; the message says why (an API 409 with a reason)."""


def agent_session_id(payload: Mapping[str, Any]) -> str | None:
    """The agent's conversation id in a hook payload (Claude: ``session_id`` in every event;
    Codex notify: ``thread-id``), when it looks like one."""
    for key in ("session_id", "thread-id", "thread_id"):
        value = payload.get(key)
        if isinstance(value, str) and AGENT_SESSION_ID.fullmatch(value):
            return value
    return None


def resume_argv(template: Sequence[str], agent: str | None, conversation: str | None) -> list[str]:
    """The command that resumes ``conversation`` with this agent's template."""
    if not template:
        raise ResumeError(f"the {agent or 'unknown'} agent has no resume command in its manifest")
    if not conversation:
        raise ResumeError(
            "the agent never reported its conversation id (its hooks did not run), so there is "
            "nothing to resume; start a new session"
        )
    if not AGENT_SESSION_ID.fullmatch(conversation):
        raise ResumeError("the recorded conversation id is not one an agent would give")
    return [part.replace("{agent_session_id}", conversation) for part in template]
