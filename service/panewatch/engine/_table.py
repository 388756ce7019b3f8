"""The live sessions by id, and what goes out of them: state changes (an event, a log line, the
notifier), the wake-ups of their watchers, the counters that outlive a deleted session.

Every part reads sessions here and every decision is recorded here (``apply``), so a state
change is announced the same way whichever part decided it.
"""

from __future__ import annotations

import asyncio
import logging

from ..states import Decision, Source, State
from ._context import EngineContext
from ._sessions import AnySession, Session, TerminalSession
from .events import StateChanged

log = logging.getLogger("panewatch.engine")


class Sessions:
    """Sessions by id (either kind), their watchers, their state changes."""

    def __init__(self, ctx: EngineContext) -> None:
        self.ctx = ctx
        self.by_id: dict[str, AnySession] = {}
        self.watchers: dict[str, set[asyncio.Event]] = {}
        self.transitions: dict[str, int] = {}
        #: what deleted terminals had read, fed and failed to emulate (the counters never go down)
        self.gone = {"bytes_read": 0, "bytes_fed": 0, "screen_errors": 0}

    def get(self, sid: str) -> AnySession | None:
        return self.by_id.get(sid)

    def __contains__(self, sid: object) -> bool:
        return sid in self.by_id

    def __len__(self) -> int:
        return len(self.by_id)

    def values(self) -> list[AnySession]:
        return list(self.by_id.values())

    def add(self, session: AnySession) -> None:
        self.by_id[session.id] = session

    def replace(self, session: AnySession) -> AnySession | None:
        """Put ``session`` under its id (a resumed session's new launch); the one it replaces."""
        old = self.by_id.get(session.id)
        self.by_id[session.id] = session
        self.wake(session.id)
        return old

    def pop(self, session: AnySession) -> None:
        """Forget a session (deleted, or a launch that never started); its counters are kept."""
        if self.by_id.get(session.id) is session:
            del self.by_id[session.id]
        if isinstance(session, TerminalSession):
            pane = session.pane
            self.gone["bytes_read"] += pane.bytes_read
            self.gone["bytes_fed"] += pane.bytes_fed
            self.gone["screen_errors"] += pane.screen.errors
        self.wake(session.id)

    # -- state changes -------------------------------------------------------------------------
    def apply(self, session: Session, decision: Decision, force: bool = False) -> None:
        """Record ``decision``; when the state changed (or ``force``), announce it."""
        prev = session.set_decision(decision)
        if prev is None and not force:
            return
        decision = session.decision
        prev_state = prev.state if prev else None
        self.transitions[decision.source] = self.transitions.get(decision.source, 0) + 1
        log.info(
            "state %s -> %s (%s %s)",
            prev_state,
            decision.state,
            decision.source,
            decision.decided_by,
            extra={"session": session.id},
        )
        asks = session.request()
        self.ctx.hub.publish(
            StateChanged(
                session.id,
                decision.state,
                prev_state,
                decision.source,
                decision.decided_by,
                decision.why,
                decision.since,
                session.exit_code,
                session.error,
                asks,
            )
        )
        self.wake(session.id)
        if prev is not None:
            # leaving the launch placeholder is not the end of a turn
            self.ctx.notifier.on_transition(
                session=session.id,
                name=session.name,
                agent=agent_name(session),
                prev=None if prev.source == Source.start else str(prev_state),
                state=str(decision.state),
                source=str(decision.source),
                rule=decision.decided_by,
                why=decision.why,
                request=None if asks is None else asks.model_dump(),
            )

    def by_state(self) -> dict[str, int]:
        counts = {str(state): 0 for state in State}
        for session in self.by_id.values():
            counts[str(session.decision.state)] += 1
        return counts

    # -- watchers --------------------------------------------------------------------------------
    def watch(self, sid: str) -> asyncio.Event:
        """An event set whenever the session's screen or state moves (a stream waits on it)."""
        event = asyncio.Event()
        self.watchers.setdefault(sid, set()).add(event)
        return event

    def unwatch(self, sid: str, event: asyncio.Event) -> None:
        self.watchers.get(sid, set()).discard(event)

    def wake(self, sid: str) -> None:
        for event in self.watchers.get(sid, ()):
            event.set()


def agent_name(session: Session) -> str:
    """The agent a notification names: the manifest that reads the pane, else the launched one."""
    if isinstance(session, TerminalSession):
        return session.pane.manifest_agent or session.pane.agent or ""
    return session.spec.agent or ""
