"""Guarded writes: the screen is read again right before any write, a blocked pane takes only
an answer, and an answer is checked to have taken. A refused write says why (``Conflict``
with the decision it saw; ``NotReadingInput`` when the agent does not read its input)."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .errors import Conflict, NotReadingInput
from .hosts.base import HostError, WriteRefused
from .pane import Pane
from .session import Session
from .states import Decision, State

if TYPE_CHECKING:
    from .panes import Panes

log = logging.getLogger("panewatch.engine")

#: /send: an Enter followed by this much silence is pressed once more.
ENTER_RETRY_S = 0.8


@dataclass(frozen=True)
class AnswerResult:
    took: bool
    state: State
    rule: str | None
    waited: float
    keys: str


def prompt_reacted(before: list[str], cursor_row: int, screen: Any) -> bool:
    """Whether the program answered a prompt: the cursor left the prompt's row, or another row
    changed, or the prompt's row no longer starts with what it showed (more than an echo)."""
    lines = screen.lines()
    row = screen.cursor.row
    if row != cursor_row or len(lines) != len(before):
        return True
    if any(old != new for i, (old, new) in enumerate(zip(before, lines, strict=True)) if i != row):
        return True
    prompt = before[row] if 0 <= row < len(before) else ""
    return not lines[row].startswith(prompt) if prompt else lines[row] != prompt


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
    pane = session.pane
    read_before = pane.bytes_read
    # Only multi-line text is pasted (bracketed), so its newlines do not submit. One line is
    # typed: Gemini CLI 0.61.0 distrusts pastes when its kitty-keyboard check raced its
    # first render, and then turns an Enter within 40 ms of its own re-render into a newline.
    if pane.screen.mode(2004) and "\n" in text:
        write(session, b"\x1b[200~" + text.encode() + b"\x1b[201~")
    elif text:
        write(session, text.replace("\n", "\r").encode())
    elif not session.writable:
        raise Conflict("the session has exited", decision)
    if enter:
        # A TUI that reads "text\r" in one chunk takes it for a paste, and an Ink app given
        # Enter before it re-rendered the typed text submits its old, empty input (one Gemini
        # send in ten under load): wait for the echo, then for a quiet beat.
        await _echoed(panes, pane, read_before if text else None, text.strip()[-10:])
        before_enter = pane.bytes_read
        write(session, b"\r")
        if text:
            await _enter_again_if_ignored(panes, session, before_enter)
    return decision


async def _enter_again_if_ignored(panes: Panes, session: Session, before_enter: int) -> None:
    """An Enter the agent ignored leaves the pane silent (Gemini CLI drops one now and then at a
    turn's end or its start-up): press it once more. A second Enter on an emptied input box is a
    no-op for the agents we know."""
    pane, clock = session.pane, panes.clock
    start = clock.time()
    while clock.time() - start < ENTER_RETRY_S and pane.bytes_read == before_enter:
        await clock.sleep(0.02)
    if pane.bytes_read == before_enter and session.writable:
        log.info("no output %.1f s after Enter; pressing it again", ENTER_RETRY_S, extra={"session": session.id})
        write(session, b"\r")


async def _echoed(
    panes: Panes,
    pane: Pane,
    read_before: int | None,
    tail: str = "",
    *,
    least: float = 0.08,
    quiet: float = 0.05,
    most: float = 1.5,
) -> None:
    """Wait at least ``least`` s; with typed text, also until the screen shows its last
    characters (the echo: a footer redrawn at start-up does not count) and the agent was
    quiet for ``quiet`` s — at most ``most`` s in all, so a program that does not echo
    still gets its Enter."""
    clock = panes.clock
    start = clock.time()
    await clock.sleep(least)
    if read_before is None:
        return
    while clock.time() - start < most:
        settled = pane.bytes_read != read_before and clock.time() - pane.last_output >= quiet
        if settled and (not tail or tail in "\n".join(pane.screen.lines())):
            return
        await clock.sleep(0.02)


async def answer(
    panes: Panes, session: Session, *, option: int | None, keys: str | None, settle: float, deadline: float
) -> AnswerResult:
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
    before = (pane.screen.lines(), pane.screen.cursor.row)
    write(session, data.encode())
    start = clock.time()
    took = False
    while clock.time() - start < deadline:
        await clock.sleep(0.05)
        decision = panes.classify(session)
        # the rule no longer matching is not enough: an echo ("^[" after "[y/N] ") breaks it
        # while the program still waits; the program must have reacted
        if decision.state != State.blocked and prompt_reacted(*before, pane.screen):
            took = True
            break
    return AnswerResult(took, decision.state, decision.decided_by, round(clock.time() - start, 3), data)
