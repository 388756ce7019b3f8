"""Guarded writes: the screen is read again right before any write, a blocked pane takes only
an answer, and an answer is checked to have taken. A refused write says why (``Conflict``
with the decision it saw; ``NotReadingInput`` when the agent does not read its input)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from .errors import Conflict, NotReadingInput
from .hosts.base import HostError, WriteRefused
from .session import Session
from .states import Decision, State

if TYPE_CHECKING:
    from .panes import Panes


@dataclass(frozen=True)
class AnswerResult:
    took: bool
    state: State
    rule: str | None
    waited: float
    keys: str


def write(session: Session, data: bytes) -> None:
    """Queue ``data`` for the agent, or raise the domain error that says why not."""
    if session.handle is None or not session.handle.alive:
        raise Conflict("the session has exited", session.pane.decision)
    try:
        session.handle.write(data)
    except WriteRefused as exc:
        raise NotReadingInput(str(exc), session.pane.decision) from None
    except HostError as exc:
        raise Conflict(f"the host refused the write: {exc}", session.pane.decision) from None


async def send(panes: Panes, session: Session, text: str, *, enter: bool = True) -> Decision:
    """Type ``text`` (and Enter), unless the pane is blocked at this moment."""
    decision = panes.classify(session)
    if decision.state == State.blocked:
        raise Conflict(f"the pane is blocked ({decision.decided_by}: {decision.why}); answer it instead", decision)
    if session.pane.screen.mode(2004) and ("\n" in text or len(text) > 1):
        write(session, b"\x1b[200~" + text.encode() + b"\x1b[201~")
    elif text:
        write(session, text.replace("\n", "\r").encode())
    elif not session.writable:
        raise Conflict("the session has exited", decision)
    if enter:
        # a TUI that reads "text\r" in one chunk takes it for a paste; give it a beat
        await panes.clock.sleep(0.08)
        write(session, b"\r")
    return decision


async def answer(panes: Panes, session: Session, *, option: int | None, keys: str | None, settle: float,
                 deadline: float) -> AnswerResult:
    """Answer the prompt only when blocked now; then wait for the prompt to go away."""
    pane, clock = session.pane, panes.clock
    decision = panes.classify(session)
    if decision.state != State.blocked:
        raise Conflict(f"the pane is not blocked (it is {decision.state}); nothing to answer", decision)
    if not session.writable:
        raise Conflict("the session has exited", decision)
    # a key sent while the prompt is still being drawn can be dropped: wait for quiet
    limit = clock.time() + 1.0
    while clock.time() - pane.last_output < settle and clock.time() < limit:
        await clock.sleep(0.03)
    decision = panes.classify(session)
    if decision.state != State.blocked:
        raise Conflict(f"the prompt went away before the answer (now {decision.state})", decision)
    if option is not None:
        manifest = pane.manifest(panes.engine.store)
        data = (manifest.manifest.option_keys if manifest else "{n}").replace("{n}", str(option))
    else:
        data = keys or ""
    write(session, data.encode())
    start = clock.time()
    took = False
    while clock.time() - start < deadline:
        await clock.sleep(0.05)
        decision = panes.classify(session)
        if decision.state != State.blocked:
            took = True
            break
    return AnswerResult(took, decision.state, decision.decided_by, round(clock.time() - start, 3), data)
