"""The engine's running panes: how host callbacks, the scheduler and classification meet.

Private to the engine (the façade in ``engine.py`` is the public surface). Hosts call in
through a per-session sink; the scheduler calls in through ``Flow``; state changes go out as
typed events and to the notifier.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from contextlib import suppress
from typing import TYPE_CHECKING, Any

from .clock import Clock
from .events import Created, Desktop, Output, StateChanged
from .hosts.base import HostError, PaneSink
from .notify import BODY_MAX, TITLE_MAX, clean
from .scheduler import Scheduler
from .session import Session
from .states import Decision, Source, State
from .transcript import Transcript

if TYPE_CHECKING:
    from .engine import Engine

log = logging.getLogger("panewatch.engine")

#: A pane whose output stalled mid-repaint this long is read anyway.
MID_FRAME_WAIT_S = 1.0


class _Sink:
    """What a host calls for one session (always on the event loop)."""

    def __init__(self, panes: Panes, session: Session) -> None:
        self.panes, self.session = panes, session

    def on_output(self, data: bytes) -> None:
        self.panes.output(self.session, data)

    def on_exit(self, code: int | None, reason: str) -> None:
        self.panes.exited(self.session, code, reason)

    def on_status(self, state: str, detail: str) -> None:
        self.panes.status(self.session, state, detail)


class Panes:
    """Sessions by id, their scheduling and classification, and the engine's counters."""

    def __init__(self, engine: Engine, clock: Clock) -> None:
        self.engine, self.clock = engine, clock
        self.sessions: dict[str, Session] = {}
        self.scheduler = Scheduler(clock, engine.timing, self)
        self._sweeping: list[str] | None = None  # keys the sweep under way has yet to look at
        self.watchers: dict[str, set[asyncio.Event]] = {}
        self.output_sinks: dict[str, list[Callable[[bytes], None]]] = {}
        self.classifications = 0
        self.transitions: dict[str, int] = {}
        self.gone = {"bytes_read": 0, "bytes_fed": 0, "screen_errors": 0}

    # -- membership ------------------------------------------------------------------------
    def add(self, session: Session) -> None:
        self.sessions[session.id] = session
        self.scheduler.add(session.id, session.pane)

    def discard(self, session: Session) -> None:
        """Undo ``add`` for a session whose launch failed unexpectedly (nothing was started)."""
        self.sessions.pop(session.id, None)
        self.scheduler.forget(session.id)

    def record(self, session: Session, *, resume: bool = False) -> None:
        """Start the session's asciicast recording, when recordings are on (``resume``: an
        adopted session's recording continues in its file)."""
        folder = self.engine.transcripts
        if folder is None:
            return
        recording = Transcript(
            folder / f"{session.id}.cast",
            rows=session.pane.screen.rows,
            cols=session.pane.screen.cols,
            max_bytes=self.engine.transcript_max_bytes,
            loop=asyncio.get_running_loop(),
            title=session.name,
            command=session.argv,
            session=session.id,
            resume=resume,
        )
        session.transcript = recording
        self.output_sinks.setdefault(session.id, []).append(recording.output)

    def sink(self, session: Session) -> PaneSink:
        return _Sink(self, session)

    def failed(self, session: Session, error: str) -> None:
        """The host could not start it: an exited session that says why."""
        log.warning("could not start: %s", error, extra={"session": session.id})
        session.error = error
        session.pane.set_exit(127)
        session.pane.screen.feed(f"panewatch: {error}\r\n".encode())
        self.engine.hub.publish(Created(session.info()))
        self.apply(session, session.pane.classify(self.engine.store, self.engine.freshness))

    async def remove(self, session: Session) -> None:
        await self._end(session)
        pane = session.pane
        self.gone["bytes_read"] += pane.bytes_read
        self.gone["bytes_fed"] += pane.bytes_fed
        self.gone["screen_errors"] += pane.screen.errors
        self.sessions.pop(session.id, None)
        self.scheduler.forget(session.id)
        self.output_sinks.pop(session.id, None)
        self._wake(session.id)

    async def _end(self, session: Session) -> None:
        handle = session.handle
        if handle is not None:
            try:  # also once exited: what it left running ends with the session, and a host may
                # still hold the pane (tmux keeps a dead pane's window)
                await handle.terminate()
            except HostError as exc:
                log.warning("could not end the agent: %s", exc, extra={"session": session.id})
            handle.close()
        if session.transcript:
            await session.transcript.aclose()

    async def close_all(self) -> None:
        """The server stops: agents end with it, unless their host keeps them for the next one."""
        self.scheduler.stop()
        ending = []
        for session in list(self.sessions.values()):
            host = self.engine.hosts.get(session.host)
            if host is not None and host.survives_restart:
                if session.handle is not None:
                    session.handle.close()
                if session.transcript:
                    ending.append(session.transcript.aclose())
            else:
                ending.append(self._end(session))
        await asyncio.gather(*ending)

    async def reload_manifests(self, every: float) -> None:
        """Re-read changed manifests off the event loop; refusals are logged in each pane."""
        store = self.engine.store
        while True:
            await asyncio.sleep(every)
            for err in await asyncio.to_thread(store.reload_if_changed):
                log.warning("manifest refused, previous version kept: %s", err)
                for s in self.sessions.values():
                    if err.path.stem in (s.pane.manifest_agent, s.pane.agent):
                        log.warning(
                            "its manifest %s was refused; the previous version stays in use",
                            err.path.name,
                            extra={"session": s.id},
                        )

    # -- from the host ---------------------------------------------------------------------
    def output(self, session: Session, data: bytes) -> None:
        session.pane.receive(data)
        for sink in self.output_sinks.get(session.id, ()):
            sink(data)
        self.engine.hub.publish(Output(session.id, data))
        self.scheduler.output(session.id)

    def exited(self, session: Session, code: int | None, reason: str) -> None:
        pane = session.pane
        if code is None:
            session.error = reason  # a lost pane says why (the tmux server is gone...)
        pane.set_exit(code)
        pane.feed_all()
        self.desktop(session)
        self._wake(session.id)
        log.info("exited with %s (%s)", code, reason, extra={"session": session.id})
        if pane.exact is not None:  # a host that states states says why it ended, too
            pane.set_exact(Decision(State.exited, Source.exit, reason, exit_code=code))
        decision = pane.classify(self.engine.store, self.engine.freshness)
        if decision.state == State.lost:
            decision = Decision(State.lost, Source.exit, f"the host lost the pane: {reason}")
        self.apply(session, decision)

    def status(self, session: Session, state: str, detail: str) -> None:
        """An exact state from the host (ACP): the pane's decision from now on. ``detail``
        starts with the protocol message that decided it, which names the event."""
        try:
            known = State(state)
        except ValueError:
            log.warning("the host reported an unknown state %r; ignored", state, extra={"session": session.id})
            return
        source = Source.acp if session.host == "acp" else Source.host
        event = detail.split(":", 1)[0].split(" ", 1)[0] if detail else "status"
        decision = Decision(known, source, detail or f"the host reported {state}", event=event)
        session.pane.set_exact(decision)
        self.apply(session, decision)

    def reply(self, sid: str, data: bytes) -> None:
        """Answers to the agent's terminal queries go straight back into its input."""
        session = self.sessions.get(sid)
        if (
            session is not None
            and session.handle is not None
            and session.handle.alive
            and not session.handle.answers_queries
        ):
            with suppress(HostError):  # an agent that does not read its input does not read the answer
                session.handle.write(data)

    def desktop(self, session: Session) -> None:
        """The agent's desktop notifications (OSC 9/99/777) just fed: each a typed event for
        in-process sinks, and to the notifier, which bounds them per session."""
        pane = session.pane
        for note in pane.take_desktop():
            title, body = clean(note.title, TITLE_MAX), clean(note.body, BODY_MAX)
            self.engine.hub.publish(Desktop(session.id, note.protocol, title, body, self.engine.wall()))
            self.engine.notifier.on_desktop(
                session=session.id,
                name=session.name,
                agent=pane.manifest_agent or pane.agent or "",
                state=str(pane.decision.state),
                protocol=note.protocol,
                title=title,
                body=body,
            )

    # -- Flow (the scheduler's calls) ------------------------------------------------------
    def fed(self, key: str) -> None:
        session = self.sessions.get(key)
        if session is not None and session.pane.desktop:
            self.desktop(session)
        self._wake(key)

    def pause(self, key: str) -> None:
        session = self.sessions.get(key)
        if session is not None and session.handle is not None:
            session.handle.pause_reading()

    def resume(self, key: str) -> None:
        session = self.sessions.get(key)
        if session is not None and session.handle is not None:
            session.handle.resume_reading()

    def sweep(self, now: float, spent: Callable[[], bool] = lambda: False) -> bool:
        """Read the panes that need it, stopping once ``spent()``: False means called again,
        it goes on with the panes it has not looked at yet (bounded work per loop turn)."""
        if self._sweeping is None:
            self._sweeping = list(self.sessions)
        left = self._sweeping
        while left:
            session = self.sessions.get(left.pop())
            if session is not None:
                self._sweep_one(session, now)
            if left and spent():
                return False
        self._sweeping = None
        return True

    def _sweep_one(self, session: Session, now: float) -> None:
        pane = session.pane
        if pane.final or self.scheduler.flowing(pane, now):
            return
        self.sample_foreground(session, idle_too=False)
        if not pane.needs_classify(self.engine.store, self.engine.freshness):
            return
        # do not read a screen in the middle of a repaint, unless it has stalled there
        if (pane.pending or pane.screen.mid_frame) and now - pane.last_output < MID_FRAME_WAIT_S:
            return
        self.classify(session, fresh=False, sample=False)

    def due(self, key: str, now: float) -> None:
        session = self.sessions.get(key)
        if session is None:
            return
        self.sample_foreground(session, idle_too=False)
        if session.pane.needs_classify(self.engine.store, self.engine.freshness):
            self.classify(session, fresh=False, sample=False)

    # -- classification --------------------------------------------------------------------
    def sample_foreground(self, session: Session, *, idle_too: bool = True) -> None:
        """Re-read which program holds the terminal (``idle_too`` False: not for a pane with no
        output since the last sample; the sweep and change reads pass it)."""
        handle = session.handle
        if not idle_too and session.pane.quiet_since_sampled:
            return
        if handle is not None and not session.pane.exited:
            session.pane.sample_foreground(handle.foreground_pgid(), self.engine.programs)

    def classify(self, session: Session, *, fresh: bool = True, sample: bool = True) -> Decision:
        """Classify one session now (``fresh``: feed every pending byte first; ``sample``:
        re-read the foreground process, unless the caller just did)."""
        pane = session.pane
        if fresh and pane.pending:
            pane.feed_all()
            self.scheduler.drained(session.id)
            self._wake(session.id)
        if pane.desktop:  # fed here, or by a screen stream's catch-up
            self.desktop(session)
        if sample:
            self.sample_foreground(session)
        self.classifications += 1
        decision = pane.classify(self.engine.store, self.engine.freshness)
        self.apply(session, decision)
        return session.pane.decision

    def apply(self, session: Session, decision: Decision, force: bool = False) -> None:
        pane = session.pane
        prev = pane.set_decision(decision)
        if prev is None and not force:
            return
        decision = pane.decision
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
        self.engine.hub.publish(
            StateChanged(
                session.id,
                decision.state,
                prev_state,
                str(decision.source),
                decision.decided_by,
                decision.why,
                decision.since,
                pane.exit_code,
                session.error,
            )
        )
        self._wake(session.id)
        if prev is not None:
            # leaving the launch placeholder is not the end of a turn
            self.engine.notifier.on_transition(
                session=session.id,
                name=session.name,
                agent=pane.manifest_agent or pane.agent or "",
                prev=None if prev.source == Source.start else str(prev_state),
                state=str(decision.state),
                source=str(decision.source),
                rule=decision.decided_by,
                why=decision.why,
            )

    def resize(self, session: Session, rows: int, cols: int) -> None:
        pane = session.pane
        pane.feed_all()
        self.scheduler.drained(session.id)
        pane.screen.resize(rows, cols)
        if session.transcript:
            session.transcript.resize(rows, cols)
        if session.handle is not None and session.handle.alive:
            session.handle.resize(rows, cols)
        self._wake(session.id)

    # -- screen watchers -------------------------------------------------------------------
    def watch(self, sid: str) -> asyncio.Event:
        event = asyncio.Event()
        self.watchers.setdefault(sid, set()).add(event)
        return event

    def unwatch(self, sid: str, event: asyncio.Event) -> None:
        self.watchers.get(sid, set()).discard(event)

    def _wake(self, sid: str) -> None:
        for event in self.watchers.get(sid, ()):
            event.set()

    # -- figures ---------------------------------------------------------------------------
    def stats(self) -> dict[str, Any]:
        panes = [s.pane for s in self.sessions.values()]
        by_state = {str(state): 0 for state in State}
        for pane in panes:
            by_state[str(pane.decision.state)] += 1
        sched = self.scheduler
        return {
            "sessions": len(panes),
            "sessions_by_state": by_state,
            "transitions": dict(self.transitions),
            "sweeps": sched.sweeps,
            "sweep_seconds": list(sched.sweep_seconds),
            "sweep_seconds_sum": sched.sweep_seconds_sum,
            "bytes_read": self.gone["bytes_read"] + sum(p.bytes_read for p in panes),
            "bytes_emulated": self.gone["bytes_fed"] + sum(p.bytes_fed for p in panes),
            "screen_errors": self.gone["screen_errors"] + sum(p.screen.errors for p in panes),
            "classifications": self.classifications,
            "notifications": self.engine.notifier.sent,
            "notifications_suppressed": self.engine.notifier.suppressed,
            "backlog": sched.backlog(),
            "bytes_read_by_session": {s.id: s.pane.bytes_read for s in self.sessions.values()},
        }
