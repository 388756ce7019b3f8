"""What the engine does for ACP sessions that it does not do for terminals: launch commands by
agent name, the structured writes (prompt, answer by option id, cancel) with the client's
refusals mapped to the engine's domain errors, and the conversation as a read model. Nothing
here reads a screen.
"""

from __future__ import annotations

from typing import Any

from ..acp import AcpError, NotOffered
from ..acp.agents import acp_agents
from ..errors import Conflict, InvalidRequest
from ..hosts.acp import AcpHandle
from ..states import Decision, State
from ._sessions import AcpSession, current_prompt_id
from .models import ConversationView, Prompt, PromptOption, SessionSpec


def launch_argv(spec: SessionSpec) -> list[str]:
    """The agent's command: the request's own, else the named ACP agent's."""
    if spec.command:
        return list(spec.command)
    agents = acp_agents()
    if not spec.agent:
        raise InvalidRequest(f"an ACP session needs an agent ({', '.join(agents)}) or a command")
    found = agents.get(spec.agent)
    if found is None:
        raise InvalidRequest(f"unknown ACP agent {spec.agent!r} (known: {', '.join(agents)}; or give a command)")
    return list(found.command)


def handle_of(session: AcpSession) -> AcpHandle:
    client = session.client
    if client is None:
        raise Conflict("the agent did not start", session.decision)
    return client


def _refused(exc: AcpError, decision: Decision) -> Exception:
    if isinstance(exc, NotOffered):
        return InvalidRequest(str(exc))
    return Conflict(str(exc), decision)


def send(session: AcpSession, text: str) -> Decision:
    """``session/prompt``: refused (409) while blocked, while a turn runs, or while starting."""
    decision = session.decision
    if not text.strip():
        raise InvalidRequest("an ACP prompt needs some text")
    try:
        handle_of(session).prompt(text)
    except AcpError as exc:
        raise _refused(exc, decision) from None
    return decision


def answer(session: AcpSession, option: int | str, request: str | None) -> tuple[str, Decision]:
    """Pick an option of the pending permission: by ``optionId``, or by its number (1 = the
    first offered). Returns the option id and the state after it."""
    handle = handle_of(session)
    decision = session.decision
    option_id = option
    if isinstance(option, int):
        perm = handle.pending()
        if perm is not None and request is not None and perm.key != request:
            perm = next((p for p in handle.client.conversation.permissions if p.key == request), None)
        if perm is None:
            raise Conflict("no permission request is pending (answered, cancelled or withdrawn)", decision)
        if not 1 <= option <= len(perm.options):
            raise InvalidRequest(f"option {option} was not offered (1..{len(perm.options)})")
        option_id = perm.options[option - 1]["option_id"]
        request = perm.key
    try:
        handle.answer(str(option_id), request)
    except AcpError as exc:
        raise _refused(exc, decision) from None
    return str(option_id), session.decision


def cancel(session: AcpSession) -> Decision:
    """``session/cancel``; 409 when no turn is running."""
    decision = session.decision
    try:
        handle_of(session).cancel()
    except AcpError as exc:
        raise _refused(exc, decision) from None
    return session.decision


#: What a session whose agent never started (or was restored lost) has to show.
NOTHING_SAID: dict[str, Any] = {
    "seq": 0,
    "dropped": 0,
    "entries": [],
    "plan": [],
    "permission": None,
    "permissions": [],
    "agent": None,
    "session_id": None,
    "phase": "exited",
    "turns": 0,
    "stop_reason": None,
    "error": None,
    "faults": {},
    "stdout_noise": [],
    "stderr_tail": "",
}


def conversation(session: AcpSession) -> ConversationView:
    """The conversation as the client keeps it, with the session's state."""
    client = session.client
    body = client.conversation() if client is not None else NOTHING_SAID
    return ConversationView.model_validate(
        {**body, "type": "conversation", "session": session.id, **session.decision.as_dict()}
    )


def prompt(session: AcpSession) -> Prompt | None:
    """The screen view's ``prompt`` for an ACP session: the pending permission's options."""
    client = session.client
    if session.decision.state != State.blocked or client is None:
        return None
    perm = client.pending()
    if perm is None:
        return None
    return Prompt(
        kind="options",
        id=current_prompt_id(session, session.decision) or "",
        request=perm.key,
        title=perm.title,
        options=[
            PromptOption(option=n, option_id=o["option_id"], label=o["name"], kind=o["kind"])
            for n, o in enumerate(perm.options, 1)
        ],
    )
