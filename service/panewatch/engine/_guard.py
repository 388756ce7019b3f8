"""Guarded writes: the screen is read again right before any write, a blocked pane takes only
an answer, and an answer is checked to have taken. A refused write says why (``Conflict``
with the decision it saw; ``NotReadingInput`` when the agent does not read its input).

Keys a person types into a terminal they see go through unguarded, with one rule: keys that
arrive within ``hold_keys_ms`` (1 s by default) of the pane turning blocked were typed before the
user could have seen the prompt, so they are held until the user says "send anyway" or "drop".

Every write names who does it; the guard logs it and announces it (``Acted``), a refused one
too, with what the actor saw (the request, the screen) and, for an answer, whether it took.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from ..errors import Conflict, InvalidRequest, NotReadingInput, PanewatchError, PromptGone
from ..hosts.base import HostError, WriteRefused
from ..panes.pane import Pane
from ..panes.prompts import PASSWORD
from ..states import Decision, State
from . import _acp
from ._context import EngineContext
from ._feed import Feed
from ._keys import Burst, KeyTally
from ._sessions import AcpSession, AnySession, Session, TerminalSession, current_prompt_id
from .events import Acted, Action, seen_lines
from .models import Actor, AnswerResult, Cancelled, RequestView, Sent

log = logging.getLogger("panewatch.engine")

#: /send: an Enter followed by this much silence is pressed once more.
ENTER_RETRY_S = 0.8
#: /send: the typed text gone from its row, on a screen this quiet, is an Enter that took.
ENTER_TOOK_QUIET_S = 0.1


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
        raise Conflict("the session has exited", session.decision)
    try:
        session.handle.write(data)
    except WriteRefused as exc:
        raise NotReadingInput(str(exc), session.decision) from None
    except HostError as exc:
        raise Conflict(f"the host refused the write: {exc}", session.decision) from None


def check_prompt(session: AnySession, decision: Decision, expected: str | None) -> None:
    """Refuse (``PromptGone``, 409) an answer meant for another prompt than the one on the pane
    now. ``expected`` None: the caller named no prompt (a script that just read the screen)."""
    if expected is not None and current_prompt_id(session, decision) != expected:
        raise PromptGone(decision)


def _verified(verify: Callable[[], str | None] | None, decision: Decision) -> None:
    """``Conflict`` when the caller's own last check (the policy's) finds a reason not to write."""
    why = verify() if verify is not None else None
    if why:
        raise Conflict(f"not answered: {why}", decision)


def _input_row(pane: Pane, tail: str) -> tuple[int, str] | None:
    """The cursor's row and its text when it shows the typed text's end (the input box), else None:
    an Enter that took moves the cursor off that row or empties it."""
    row = pane.screen.cursor.row
    lines = pane.screen.lines()
    line = lines[row] if tail and 0 <= row < len(lines) else ""
    return (row, line) if tail and tail in line else None


def _enter_took(pane: Pane, tail: str, waiting: tuple[int, str], now: float) -> bool:
    """The typed text is off its row on a screen that is quiet, all fed and not mid-repaint: the
    Enter took (an ignored one leaves it there, or redraws it there at once)."""
    if now - pane.last_output < ENTER_TOOK_QUIET_S or pane.pending or pane.screen.mid_frame:
        return False
    row = _input_row(pane, tail)
    return row is None or row[0] != waiting[0]


@dataclass(frozen=True)
class Seen:
    """What the actor of a write saw right before it: the pane's state, its request, its screen."""

    state: State
    request: RequestView | None
    screen: tuple[str, ...]
    agent: str | None
    secret: bool = False  # the prompt asks for a password: what is typed into it is never kept

    def as_tuple(self) -> tuple[str | None, State, RequestView | None, tuple[str, ...]]:
        return self.agent, self.state, self.request, self.screen


def seen(session: AnySession) -> Seen:
    """The session as last read (callers read it right before), bounded for the ledger."""
    state = session.decision.state
    agent = session.pane.manifest_agent or session.pane.agent if isinstance(session, TerminalSession) else None
    lines = session.lines()
    asks = [line.rstrip() for line in lines if line.strip()][-3:] if state == State.blocked else []
    return Seen(
        state,
        session.request() if state == State.blocked else None,
        seen_lines(lines),
        agent or session.spec.agent,
        any(PASSWORD.search(line) for line in asks),
    )


@dataclass
class Typing:
    """One person's keys into one terminal (a dashboard's terminal channel): those held back,
    and where they were typing (the cursor's row and its line before the last keys)."""

    held: list[str] = field(default_factory=list)
    at: tuple[int, str] | None = None


class Guard:
    """The writes to sessions, each checked against the state read right before it."""

    def __init__(self, ctx: EngineContext, feed: Feed) -> None:
        self.ctx, self.feed = ctx, feed
        self.keys = KeyTally(ctx.clock, self._typed)  # keys typed by hand, logged in bursts

    def _acted(
        self,
        sid: str,
        action: Action,
        actor: Actor,
        saw: Seen | None,
        detail: str = "",
        *,
        option: int | str | None = None,
        keys: str | None = None,
        took: bool | None = None,
        refused: str | None = None,
    ) -> None:
        """Announce a write (or a refused one) with what its actor saw; keys typed into a
        password prompt are told by their length only."""
        if saw is not None and saw.secret and keys:
            keys = f"(hidden: {len(keys)} characters)"
        agent, state, request, screen = (None, None, None, ()) if saw is None else saw.as_tuple()
        event = Acted(
            sid, action, actor, detail, agent=agent, state=state, request=request, option=option, keys=keys,
            took=took, refused=refused, screen=screen,
        )  # fmt: skip
        self.ctx.hub.publish(event)

    @contextmanager
    def _refusals(
        self,
        session: AnySession,
        action: Action,
        actor: Actor,
        option: int | str | None = None,
        keys: str | None = None,
    ) -> Iterator[None]:
        """A write refused (409, 422) is announced as well, with why and what its actor saw."""
        try:
            yield
        except PanewatchError as exc:
            self._acted(session.id, action, actor, seen(session), option=option, keys=keys, refused=str(exc))
            raise

    def _typed(self, sid: str, burst: Burst) -> None:
        saw = burst.seen if isinstance(burst.seen, Seen) else None
        keys = burst.kept.decode("utf-8", "replace") if burst.state == State.blocked else None
        self._acted(sid, Action.keys, burst.actor, saw, f"{burst.nbytes} bytes in {burst.writes} writes", keys=keys)

    # -- send ------------------------------------------------------------------------------------
    async def send(self, session: AnySession, text: str, actor: Actor, *, enter: bool = True) -> Sent:
        """Type ``text`` (and Enter), unless the pane is blocked at this moment; an ACP session
        takes it as a prompt (``session/prompt``), where Enter means nothing."""
        with self._refusals(session, Action.send, actor):
            if isinstance(session, AcpSession):
                saw = seen(session)
                decision = _acp.send(session, text)
            else:
                decision, saw = await self._type(session, text, enter=enter)
        log.info("sent %d characters by %s", len(text), actor, extra={"session": session.id})
        self._acted(session.id, Action.send, actor, saw, f"{len(text)} characters")
        return Sent(sent=True, state_before=decision.state)

    async def _type(self, session: TerminalSession, text: str, *, enter: bool) -> tuple[Decision, Seen]:
        decision = self.feed.classify(session)
        saw = seen(session)
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
            await self._echoed(pane, read_before if text else None, text.strip()[-10:])
            before_enter = pane.bytes_read
            tail = text.strip()[-10:]
            waiting = _input_row(pane, tail)
            write(session, b"\r")
            if text:
                await self._enter_again_if_ignored(session, before_enter, waiting, tail)
        return decision, saw

    async def _enter_again_if_ignored(
        self, session: TerminalSession, before_enter: int, waiting: tuple[int, str] | None, tail: str
    ) -> None:
        """An Enter the agent ignored leaves the pane silent, or redrawn with the typed text still in
        its input box (Gemini CLI drops one now and then at a turn's end or its start-up, more under
        load): press it once more, re-read first. A second Enter on an emptied input box is a no-op
        for the agents we know."""
        pane, clock = session.pane, self.ctx.clock
        start = clock.time()
        while clock.time() - start < ENTER_RETRY_S and pane.bytes_read == before_enter:
            await clock.sleep(0.02)
        silent = pane.bytes_read == before_enter
        still = False
        if not silent and waiting is not None:  # until it took, else look again when the time is up
            while clock.time() - start < ENTER_RETRY_S and not _enter_took(pane, tail, waiting, clock.time()):
                await clock.sleep(0.02)
            now = _input_row(pane, tail)
            still = now is not None and now[0] == waiting[0]  # same row, the text still on it
        if (silent or still) and session.writable and self.feed.classify(session).state != State.blocked:
            why = "no output" if silent else "the typed text still in the input box"
            log.info("%s %.1f s after Enter; pressing it again", why, ENTER_RETRY_S, extra={"session": session.id})
            write(session, b"\r")

    async def _echoed(
        self, pane: Pane, read_before: int | None, tail: str = "", *, least: float = 0.08, most: float = 1.5
    ) -> None:
        """Wait at least ``least`` s; with typed text, also until the screen shows its last
        characters (the echo: a footer redrawn at start-up does not count) and the agent was
        quiet for 50 ms — at most ``most`` s in all, so a program that does not echo still gets
        its Enter."""
        clock = self.ctx.clock
        start = clock.time()
        await clock.sleep(least)
        if read_before is None:
            return
        while clock.time() - start < most:
            settled = pane.bytes_read != read_before and clock.time() - pane.last_output >= 0.05
            if settled and (not tail or tail in "\n".join(pane.screen.lines())):
                return
            await clock.sleep(0.02)

    # -- answer ----------------------------------------------------------------------------------
    async def answer(
        self,
        session: AnySession,
        actor: Actor,
        *,
        option: int | str | None,
        keys: str | None,
        request: str | None = None,
        settle: float = 0.2,
        deadline: float = 3.0,
        prompt_id: str | None = None,
        verify: Callable[[], str | None] | None = None,
    ) -> AnswerResult:
        """Answer a prompt: only when blocked now; then check that the prompt went away. An ACP
        session takes an option id (or number) and, optionally, the permission request's id.
        ``prompt_id`` (from a screen read or a notification): only that same prompt, else 409.
        ``verify`` (the policy's): why not to write after all, asked right before writing."""
        with self._refusals(session, Action.answer, actor, option=option, keys=keys):
            result, saw = await self._answer_any(
                session, option=option, keys=keys, request=request, settle=settle, deadline=deadline,
                prompt_id=prompt_id, verify=verify,
            )  # fmt: skip
        if result.took:
            self.ctx.notifier.answered(session.id)  # the next prompt is a new one: it rings at once
        log.info("answered %r by %s (took: %s)", result.keys, actor, result.took, extra={"session": session.id})
        what = f"option {option}" if option is not None else "keys"
        self._acted(session.id, Action.answer, actor, saw, what, option=option, keys=result.keys, took=result.took)
        return result

    async def _answer_any(
        self,
        session: AnySession,
        *,
        option: int | str | None,
        keys: str | None,
        request: str | None,
        settle: float,
        deadline: float,
        prompt_id: str | None,
        verify: Callable[[], str | None] | None,
    ) -> tuple[AnswerResult, Seen]:
        """Either kind's answer, and what the pane showed right before it was written."""
        if (option is None) == (keys is None):
            raise InvalidRequest("give exactly one of option or keys")
        if isinstance(session, AcpSession):
            if option is None:
                raise InvalidRequest("an ACP permission is answered with an option (its id or number), not keys")
            check_prompt(session, session.decision, prompt_id)
            _verified(verify, session.decision)
            saw = seen(session)
            option_id, after = _acp.answer(session, option, request)
            # the protocol confirms delivery: the request is settled the moment it is answered
            took = after.state != State.blocked
            return AnswerResult(took=took, state=after.state, rule=after.decided_by, waited_s=0.0, keys=option_id), saw
        if isinstance(option, str):
            raise InvalidRequest("a terminal prompt's option is a number")
        return await self._answer(
            session, option=option, keys=keys, settle=settle, deadline=deadline, prompt_id=prompt_id, verify=verify
        )

    async def _blocked_now(
        self, session: TerminalSession, settle: float, prompt_id: str | None, verify: Callable[[], str | None] | None
    ) -> Decision:
        """The pane's state read now, once its prompt is drawn (a key sent while it is still
        being drawn can be dropped: wait for quiet); ``Conflict`` unless it is blocked (on the
        prompt named by ``prompt_id``, when one is named: ``PromptGone`` otherwise)."""
        pane, clock = session.pane, self.ctx.clock
        limit = clock.time() + 1.0
        decision = self.feed.classify(session)
        if decision.state != State.blocked and clock.time() - pane.last_output < settle:
            # read while it was being drawn (a repaint clears, then draws): judged once quiet
            await self._quiet(pane, settle, limit)
            decision = self.feed.classify(session)
        check_prompt(session, decision, prompt_id)
        if decision.state != State.blocked:
            raise Conflict(f"the pane is not blocked (it is {decision.state}); nothing to answer", decision)
        if not session.writable:
            raise Conflict("the session has exited", decision)
        await self._quiet(pane, settle, limit)
        decision = self.feed.classify(session)
        check_prompt(session, decision, prompt_id)  # read again right before writing
        if decision.state != State.blocked:
            raise Conflict(f"the prompt went away before the answer (now {decision.state})", decision)
        _verified(verify, decision)
        return decision

    async def _quiet(self, pane: Pane, settle: float, limit: float) -> None:
        """Until the pane printed nothing for ``settle`` s, or the clock reaches ``limit``."""
        clock = self.ctx.clock
        while clock.time() - pane.last_output < settle and clock.time() < limit:
            await clock.sleep(0.03)

    async def _answer(
        self,
        session: TerminalSession,
        *,
        option: int | None,
        keys: str | None,
        settle: float,
        deadline: float,
        prompt_id: str | None,
        verify: Callable[[], str | None] | None = None,
    ) -> tuple[AnswerResult, Seen]:
        """Answer the prompt only when blocked now (and, given a prompt id, only that same
        prompt); then wait for the prompt to go away."""
        pane, clock = session.pane, self.ctx.clock
        decision = await self._blocked_now(session, settle, prompt_id, verify)
        saw = seen(session)
        if option is not None:
            manifest = pane.manifest(self.ctx.store)
            data = (manifest.manifest.option_keys if manifest else "{n}").replace("{n}", str(option))
        else:
            data = keys or ""
        before = (pane.screen.lines(), pane.screen.cursor.row)
        write(session, data.encode())
        start = clock.time()
        took = False
        while clock.time() - start < deadline:
            await clock.sleep(0.05)
            decision = self.feed.classify(session)
            # the rule no longer matching is not enough: an echo ("^[" after "[y/N] ") breaks it
            # while the program still waits; the program must have reacted
            if decision.state != State.blocked and prompt_reacted(*before, pane.screen):
                took = True
                break
        waited = round(clock.time() - start, 3)
        return AnswerResult(took=took, state=decision.state, rule=decision.decided_by, waited_s=waited, keys=data), saw

    # -- cancel ----------------------------------------------------------------------------------
    def cancel(self, session: AnySession, actor: Actor) -> Cancelled:
        """Interrupt an ACP session's turn (``session/cancel``); 409 when no turn runs."""
        if not isinstance(session, AcpSession):
            raise InvalidRequest("cancel is for ACP sessions; a terminal takes keys (Esc, Ctrl-C) via answer/send")
        d = _acp.cancel(session)
        log.info("turn cancelled by %s", actor, extra={"session": session.id})
        self._acted(session.id, Action.cancel, actor, seen(session))
        return Cancelled(cancelled=True, state=d.state, source=d.source, rule=d.decided_by, why=d.why)

    # -- keys typed by hand ------------------------------------------------------------------------
    def type_keys(self, session: AnySession, data: bytes, actor: Actor) -> None:
        """Keystrokes a person types into a terminal they see: not guarded, but every byte is
        accounted for (summed per burst: a line per key cost more than the write)."""
        state = session.decision.state
        with self._refusals(session, Action.keys, actor):
            write(session, data)
        self.keys.add(session.id, data, state, actor, (lambda: seen(session)) if state == State.blocked else None)

    def hold(self, session: AnySession, typing: Typing, now: float) -> bool:
        """Whether keys typed now are to be held back: the pane turned blocked less than
        ``hold_keys_ms`` ago, and the "prompt" is not the user's own typing (``read -p "Go? [y/N]"``
        typed at a shell matches the yes/no rule as it is typed; a real prompt comes on a new
        line, or replaces the line)."""
        decision = self.feed.classify_if_moved(session)
        if decision.state != State.blocked or now - decision.since >= self.ctx.options.hold_keys_ms / 1000:
            return False
        return not self._own_echo(session, typing.at)

    @staticmethod
    def _own_echo(session: AnySession, typing_at: tuple[int, str] | None) -> bool:
        if typing_at is None or not typing_at[1].strip():
            return False
        row, line = cursor_line(session)
        return row == typing_at[0] and line.startswith(typing_at[1])


def cursor_line(session: AnySession) -> tuple[int, str]:
    """The cursor's row and the text on it (an ACP session: the end of its conversation)."""
    if isinstance(session, TerminalSession):
        screen = session.pane.screen
        row, lines = screen.cursor.row, screen.lines()
    else:
        lines = session.lines()
        row = max(0, len([line for line in lines if line]) - 1)
    return row, lines[row] if 0 <= row < len(lines) else ""
