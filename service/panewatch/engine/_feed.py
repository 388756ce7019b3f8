"""How what a host delivers becomes a decision: the sinks hosts call, the terminals' feed and
reads (the scheduler's ``Flow``), the foreground program, the agents' desktop notifications.

Hosts call in through a per-session sink, always on the event loop; the scheduler calls in
through ``Flow``; every decision goes to the table (``Sessions.apply``), which announces it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from contextlib import suppress

from ..hosts.base import HostError, PaneSink
from ..panes.pane import Pane
from ..panes.scheduler import Scheduler
from ..sinks.notify import BODY_MAX, TITLE_MAX, clean
from ..states import Decision, Source, State
from ._context import EngineContext
from ._sessions import AcpSession, AnySession, TerminalSession
from ._table import Sessions, agent_name
from .events import Desktop, Output

log = logging.getLogger("panewatch.engine")

#: A pane whose output stalled mid-repaint this long is read anyway.
MID_FRAME_WAIT_S = 1.0


def _mid_repaint(pane: Pane, now: float) -> bool:
    """Bytes still unfed, or inside a synchronized repaint (``ESC[?2026h``…``l``), with output in
    the last ``MID_FRAME_WAIT_S``: not to be read yet, by the sweep or by change mode. A repaint
    stalled longer is read anyway."""
    return bool(pane.pending or pane.screen.mid_frame) and now - pane.last_output < MID_FRAME_WAIT_S


class _TerminalSink:
    """What a host calls for one terminal session (always on the event loop)."""

    def __init__(self, feed: Feed, session: TerminalSession) -> None:
        self.feed, self.session = feed, session

    def on_output(self, data: bytes) -> None:
        self.feed.output(self.session, data)

    def on_exit(self, code: int | None, reason: str) -> None:
        self.feed.exited(self.session, code, reason)

    def on_status(self, state: State, why: str, event: str) -> None:
        self.feed.stated(self.session, Decision(state, Source.host, why or f"the host reported {state}", event=event))

    def on_change(self) -> None:
        self.feed.table.wake(self.session.id)


class _AcpSink:
    """What the ACP host calls for one session: exact states, conversation changes, the exit."""

    def __init__(self, feed: Feed, session: AcpSession) -> None:
        self.feed, self.session = feed, session

    def on_output(self, data: bytes) -> None:
        """Never called: an ACP agent has no terminal."""

    def on_exit(self, code: int | None, reason: str) -> None:
        log.info("exited with %s (%s)", code, reason, extra={"session": self.session.id})
        self.feed.table.apply(self.session, Decision(State.exited, Source.exit, reason, exit_code=code))

    def on_status(self, state: State, why: str, event: str) -> None:
        self.feed.table.apply(self.session, Decision(state, Source.acp, why, event=event))

    def on_change(self) -> None:
        self.feed.table.wake(self.session.id)


class Feed:
    """Terminals fed and read, hosts' callbacks, the scheduler."""

    def __init__(self, ctx: EngineContext, table: Sessions) -> None:
        self.ctx, self.table = ctx, table
        self.scheduler = Scheduler(ctx.clock, ctx.options.timing, self)
        self.classifications = 0
        #: besides the table's announcements, each terminal's output goes here (recordings)
        self.output_sinks: dict[str, list[Callable[[bytes], None]]] = {}
        self._sweeping: list[str] | None = None  # sessions the sweep under way has yet to look at

    def sink(self, session: AnySession) -> PaneSink:
        if isinstance(session, TerminalSession):
            return _TerminalSink(self, session)
        return _AcpSink(self, session)

    def track(self, session: AnySession, *, read: bool = True) -> None:
        """A session enters the table; a terminal's pane is fed and read from now on (``read``
        False: once it runs, ``read``; a sweep while its spawn is under way would decide the
        state of a session that has no process yet)."""
        self.table.add(session)
        if read:
            self.read(session)

    def read(self, session: AnySession) -> None:
        """A terminal's pane is fed and read by the scheduler from now on."""
        if isinstance(session, TerminalSession):
            self.scheduler.add(session.id, session.pane)

    def untrack(self, session: AnySession) -> None:
        self.scheduler.forget(session.id)
        self.output_sinks.pop(session.id, None)
        self.table.pop(session)

    # -- from the host -------------------------------------------------------------------------
    def output(self, session: TerminalSession, data: bytes) -> None:
        session.pane.receive(data)
        for sink in self.output_sinks.get(session.id, ()):
            sink(data)
        self.ctx.hub.publish(Output(session.id, data))
        self.scheduler.output(session.id)

    def exited(self, session: TerminalSession, code: int | None, reason: str) -> None:
        pane = session.pane
        if code is None:
            session.error = reason  # a lost pane says why (the tmux server is gone...)
        pane.set_exit(code)
        pane.feed_all()
        self.desktop(session)
        self.table.wake(session.id)
        log.info("exited with %s (%s)", code, reason, extra={"session": session.id})
        if pane.exact is not None:  # a host that states states says why it ended, too
            pane.set_exact(Decision(State.exited, Source.exit, reason, exit_code=code))
        decision = pane.classify(self.ctx.store, self.ctx.options.report_freshness)
        if decision.state == State.lost:
            decision = Decision(State.lost, Source.exit, f"the host lost the pane: {reason}")
        self.table.apply(session, decision)

    def stated(self, session: TerminalSession, decision: Decision) -> None:
        """A host that knows the exact state said it: the pane's decision from now on."""
        session.pane.set_exact(decision)
        self.table.apply(session, decision)

    def reply(self, sid: str, data: bytes) -> None:
        """Answers to the agent's terminal queries go straight back into its input."""
        session = self.table.get(sid)
        handle = session.handle if session is not None else None
        if handle is not None and handle.alive and not handle.answers_queries:
            with suppress(HostError):  # an agent that does not read its input does not read the answer
                handle.write(data)

    def desktop(self, session: TerminalSession) -> None:
        """The agent's desktop notifications (OSC 9/99/777) just fed: each a typed event for
        in-process sinks, and to the notifier, which bounds them per session."""
        pane = session.pane
        for note in pane.take_desktop():
            title, body = clean(note.title, TITLE_MAX), clean(note.body, BODY_MAX)
            self.ctx.hub.publish(Desktop(session.id, note.protocol, title, body, self.ctx.wall()))
            self.ctx.notifier.on_desktop(
                session=session.id,
                name=session.name,
                agent=agent_name(session),
                state=str(pane.decision.state),
                protocol=note.protocol,
                title=title,
                body=body,
            )

    # -- Flow (the scheduler's calls) ----------------------------------------------------------
    def _terminal(self, key: str) -> TerminalSession | None:
        session = self.table.get(key)
        return session if isinstance(session, TerminalSession) else None

    def fed(self, key: str) -> None:
        session = self._terminal(key)
        if session is not None and session.pane.desktop:
            self.desktop(session)
        self.table.wake(key)

    def pause(self, key: str) -> None:
        session = self._terminal(key)
        if session is not None and session.handle is not None:
            session.handle.pause_reading()

    def resume(self, key: str) -> None:
        session = self._terminal(key)
        if session is not None and session.handle is not None:
            session.handle.resume_reading()

    def sweep(self, now: float, spent: Callable[[], bool] = lambda: False) -> bool:
        """Read the panes that need it, stopping once ``spent()``: False means called again,
        it goes on with the panes it has not looked at yet (bounded work per loop turn)."""
        if self._sweeping is None:
            self._sweeping = list(self.table.by_id)
        left = self._sweeping
        while left:
            session = self._terminal(left.pop())
            if session is not None:
                self._sweep_one(session, now)
            if left and spent():
                return False
        self._sweeping = None
        return True

    def _sweep_one(self, session: TerminalSession, now: float) -> None:
        pane = session.pane
        if session.handle is None:  # its spawn is under way (or it never started): nothing to read
            return
        if pane.final or self.scheduler.flowing(pane, now):
            return
        self.sample_foreground(session, idle_too=False)
        if not pane.needs_classify(self.ctx.store, self.ctx.options.report_freshness):
            return
        if _mid_repaint(pane, now):
            return
        self.classify(session, fresh=False, sample=False)

    def due(self, key: str, now: float) -> None:
        session = self._terminal(key)
        if session is None:
            return
        if _mid_repaint(session.pane, now):  # its end is output too, and plans the next read
            return
        self.sample_foreground(session, idle_too=False)
        if session.pane.needs_classify(self.ctx.store, self.ctx.options.report_freshness):
            self.classify(session, fresh=False, sample=False)

    # -- classification --------------------------------------------------------------------------
    def sample_foreground(self, session: TerminalSession, *, idle_too: bool = True) -> None:
        """Re-read which program holds the terminal (``idle_too`` False: not for a pane with no
        output since the last sample; the sweep and change reads pass it)."""
        handle = session.handle
        if not idle_too and session.pane.quiet_since_sampled:
            return
        if handle is not None and not session.pane.exited:
            session.pane.own_pid = handle.agent_pid  # the launched process (in a sandbox: the agent inside)
            session.pane.sample_foreground(handle.foreground_pgid(), self.ctx.programs)

    def _catch_up(self, session: TerminalSession) -> None:
        """Everything received fed to the screen, and the notifications it raised sent."""
        pane = session.pane
        if pane.pending:
            pane.feed_all()
            self.scheduler.drained(session.id)
            self.table.wake(session.id)
        if pane.desktop:  # fed here, or by a screen stream's catch-up
            self.desktop(session)

    def classify(self, session: AnySession, *, fresh: bool = True, sample: bool = True) -> Decision:
        """The session's decision now (a terminal: its screen read now; ``fresh``: feed every
        pending byte first; ``sample``: re-read the foreground, unless the caller just did).
        An ACP session's decision is the protocol's, always current."""
        if not isinstance(session, TerminalSession):
            return session.decision
        if fresh:
            self._catch_up(session)
        elif session.pane.desktop:
            self.desktop(session)
        if sample:
            self.sample_foreground(session)
        self.classifications += 1
        decision = session.pane.classify(self.ctx.store, self.ctx.options.report_freshness)
        self.table.apply(session, decision)
        return session.pane.decision

    def classify_if_moved(self, session: AnySession) -> Decision:
        """The decision ``classify`` would give now, read again only if anything moved since the
        last reading (pending bytes, the foreground program, a report, the manifests): what the
        sweep does, for a caller that asks per keystroke."""
        if not isinstance(session, TerminalSession):
            return session.decision
        self._catch_up(session)
        self.sample_foreground(session, idle_too=False)
        if session.pane.needs_classify(self.ctx.store, self.ctx.options.report_freshness):
            return self.classify(session, fresh=False, sample=False)
        return session.pane.decision

    def resize(self, session: AnySession, rows: int, cols: int) -> None:
        if isinstance(session, TerminalSession):
            pane = session.pane
            pane.feed_all()
            self.scheduler.drained(session.id)
            pane.screen.resize(rows, cols)
            if session.transcript:
                session.transcript.resize(rows, cols)
        else:
            session.rows, session.cols = rows, cols
        if session.handle is not None and session.handle.alive:
            session.handle.resize(rows, cols)
        self.table.wake(session.id)

    async def reload_manifests(self, every: float) -> None:
        """Re-read changed manifests off the event loop; refusals are logged in each pane."""
        store = self.ctx.store
        while True:
            await asyncio.sleep(every)
            for err in await asyncio.to_thread(store.reload_if_changed):
                log.warning("manifest refused, previous version kept: %s", err)
                for s in self.table.values():
                    if isinstance(s, TerminalSession) and err.path.stem in (s.pane.manifest_agent, s.pane.agent):
                        log.warning(
                            "its manifest %s was refused; the previous version stays in use",
                            err.path.name,
                            extra={"session": s.id},
                        )
