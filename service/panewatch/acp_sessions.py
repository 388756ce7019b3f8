"""What the engine does differently for ACP sessions: launch commands by agent name, and the
structured writes (prompt, answer by option id, cancel) with the client's refusals mapped to
the engine's domain errors. The façade (``engine.py``) calls in here for sessions of kind
``acp``; nothing here reads a screen.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

from .acp import AcpError, NotOffered
from .acp.agents import acp_agents
from .errors import Conflict, InvalidRequest
from .hosts.acp import AcpHandle
from .session import Session, SessionSpec
from .states import Decision, State

if TYPE_CHECKING:
    from .panes import Panes

KIND = "acp"


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


def handle_of(session: Session) -> AcpHandle:
    handle = session.handle
    if not isinstance(handle, AcpHandle):
        raise Conflict("the agent did not start", session.pane.decision)
    return handle


def _refused(exc: AcpError, decision: Decision) -> Exception:
    if isinstance(exc, NotOffered):
        return InvalidRequest(str(exc))
    return Conflict(str(exc), decision)


def send(session: Session, text: str) -> Decision:
    """``session/prompt``: refused (409) while blocked, while a turn runs, or while starting."""
    decision = session.pane.decision
    if not text.strip():
        raise InvalidRequest("an ACP prompt needs some text")
    try:
        handle_of(session).prompt(text)
    except AcpError as exc:
        raise _refused(exc, decision) from None
    return decision


def answer(session: Session, option: int | str, request: str | None) -> tuple[str, Decision]:
    """Pick an option of the pending permission: by ``optionId``, or by its number (1 = the
    first offered). Returns the option id and the state after it."""
    handle = handle_of(session)
    decision = session.pane.decision
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
    return str(option_id), session.pane.decision


def cancel(session: Session) -> Decision:
    """``session/cancel``; 409 when no turn is running."""
    decision = session.pane.decision
    try:
        handle_of(session).cancel()
    except AcpError as exc:
        raise _refused(exc, decision) from None
    return session.pane.decision


def conversation(session: Session) -> dict[str, Any]:
    d = session.pane.decision
    handle = session.handle
    body = (
        handle.conversation()
        if isinstance(handle, AcpHandle)
        else {"entries": [], "plan": [], "permission": None, "seq": 0}
    )
    return {"type": "conversation", "session": session.id, **body, **d.as_dict()}


def prompt(session: Session) -> dict[str, Any] | None:
    """The screen view's ``prompt`` for an ACP pane: the pending permission's options."""
    if session.pane.decision.state != State.blocked or not isinstance(session.handle, AcpHandle):
        return None
    perm = session.handle.pending()
    if perm is None:
        return None
    return {
        "kind": "options",
        "request": perm.key,
        "title": perm.title,
        "options": [
            {"option": n, "option_id": o["option_id"], "label": o["name"], "kind": o["kind"]}
            for n, o in enumerate(perm.options, 1)
        ],
    }


async def conversations(panes: Panes, session: Session, *, interval: float) -> AsyncIterator[dict[str, Any]]:
    """The conversation, then again whenever it (or the state) changed, at most once per
    ``interval``: always the latest, never a queue."""
    changed = panes.watch(session.id)
    try:
        last: tuple[Any, ...] | None = None
        while session.id in panes.sessions:
            view = conversation(session)
            key = (view["seq"], view["state"], view["why"])
            if key != last:
                last = key
                yield view
            await asyncio.sleep(interval)
            # redraws wake it; a change off the drawn screen (an old tool call's status) is
            # caught by the timeout
            try:
                await asyncio.wait_for(changed.wait(), 0.5)
            except TimeoutError:
                pass
            changed.clear()
    finally:
        panes.unwatch(session.id, changed)
