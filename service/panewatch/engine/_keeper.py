"""What a restart keeps: every session in the registry, written from the engine's own events.

The keeper is a sink of the hub and nothing else: it reads sessions from the table and writes
rows; it never starts, changes or ends a session (``_restore`` brings them back at start). The
registry must never take the engine down with it: a failed write is logged, not raised.
"""

from __future__ import annotations

import json
import logging

from ..clock import Timer
from ..procs.resume import agent_session_id
from ..registry import Record, Registry, hash_token
from ._context import EngineContext
from ._sessions import Session
from ._table import Sessions
from .events import Acted, Action, Created, Deleted, Event, Output, Renamed, Reported, StateChanged

log = logging.getLogger("panewatch.keeper")

#: How often changed screens are written to the registry (a killed server loses at most this much).
SCREEN_SAVE_S = 2.0
#: How long a state change may wait to be written with the others (same: lost on a kill -9).
STATE_SAVE_S = 0.5


def record_of(session: Session) -> Record:
    """The registry's row for a session as it is now."""
    handle = session.handle
    rows, cols = session.size
    decision = session.decision
    return Record(
        id=session.id,
        name=session.name,
        command=list(session.argv),
        cwd=session.cwd,
        token_hash=session.token_hash or hash_token(session.report_token),
        host_kind=str(session.host),
        host_ref=handle.ref if handle is not None else None,
        rows=rows,
        cols=cols,
        agent=session.spec.agent,
        created=session.created,
        agent_session_id=session.agent_session_id,
        state=str(decision.state),
        since=decision.since,
        why=decision.why,
        hooks=session.spec.hooks,
        launched=None if session.launched is None else list(session.launched),
        env=dict(session.spec.env),
        worktree=None if session.worktree is None else session.worktree.model_dump(),
    )


class Keeper:
    """The registry's writer: an engine event sink, its screens saved on the engine's clock."""

    def __init__(self, ctx: EngineContext, table: Sessions, registry: Registry) -> None:
        self.ctx, self.table, self.registry = ctx, table, registry
        self.known: set[str] = set()  # sessions the registry has a row for
        self._pending: dict[str, dict[str, object]] = {}
        self._flush_timer: Timer | None = None
        self._saved: dict[str, int] = {}  # session -> the screen's seq when last saved
        self._save_timer: Timer | None = None
        self._unsubscribe = ctx.hub.listen(self._on_event)
        self._plan_save()

    def close(self) -> None:
        self.flush()
        if self._save_timer is not None:
            self._save_timer.cancel()
            self._save_timer = None
        self._unsubscribe()
        self.registry.close()

    # -- screens -----------------------------------------------------------------------------------
    def _plan_save(self) -> None:
        clock = self.ctx.clock
        self._save_timer = clock.call_at(clock.time() + SCREEN_SAVE_S, self.save_screens)

    def save_screens(self) -> None:
        """Every few seconds, the screens that changed: what a lost session will still show after
        a killed server (a state change alone misses output that did not change the state)."""
        self._plan_save()
        changed = []
        for session in self.table.values():
            seq = session.seq
            if self._saved.get(session.id) != seq and session.id in self.known:
                self._saved[session.id] = seq
                changed.append((session.id, json.dumps(session.lines())))
        for sid in [sid for sid in self._saved if sid not in self.table]:
            del self._saved[sid]
        if changed:
            try:
                self.registry.save_screens(changed)
            except Exception:
                log.exception("could not save screens to %s", self.registry.path)

    # -- events ------------------------------------------------------------------------------------
    def _on_event(self, event: Event) -> None:
        if isinstance(event, Output):  # by far the most frequent: nothing to keep
            return
        try:
            if isinstance(event, Created):
                self.created(event.session.id)
            elif isinstance(event, StateChanged):
                self._state(event)
            elif isinstance(event, Deleted):
                self.known.discard(event.session)
                self._pending.pop(event.session, None)
                self.registry.remove(event.session)
            elif isinstance(event, Renamed) and event.session.id in self.known:
                self.registry.update(event.session.id, name=event.session.name)
            elif isinstance(event, Reported):
                self._reported(event)
            elif isinstance(event, Acted) and event.action == Action.resume:
                self._resumed(event.session)
        except Exception:  # the registry must never take the engine down with it
            log.exception("could not update the session registry %s", self.registry.path)

    def created(self, sid: str) -> None:
        session = self.table.get(sid)
        if session is None or sid in self.known:
            return
        self.known.add(sid)
        self.registry.add(record_of(session))

    def _reported(self, event: Reported) -> None:
        found = agent_session_id(event.payload)
        session = self.table.get(event.session)
        if found and session is not None and session.agent_session_id != found:
            session.agent_session_id = found
            self.registry.set_agent_session(event.session, found)

    def _resumed(self, sid: str) -> None:
        """A resumed session runs on a new pane, with a new report token."""
        session = self.table.get(sid)
        if session is None:
            return
        handle = session.handle
        ref = handle.ref if handle is not None else None
        token = session.token_hash or hash_token(session.report_token)
        self.registry.update(sid, host_kind=str(session.host), host_ref=ref, token_hash=token)

    def _state(self, event: StateChanged) -> None:
        if self.table.get(event.session) is None:
            return
        if event.session not in self.known:
            self.created(event.session)
        # kept for the next flush: a state change is one row in a transaction every
        # ``STATE_SAVE_S``, not a write of its own on the engine's read path
        self._pending[event.session] = {
            "state": str(event.state),
            "since": event.at,
            "why": event.why,
            "exit_code": event.exit_code,
        }
        if self._flush_timer is None:
            clock = self.ctx.clock
            self._flush_timer = clock.call_at(clock.time() + STATE_SAVE_S, self.flush)

    def flush(self) -> None:
        """Write the state changes kept since the last flush, each with its screen as it is now."""
        if self._flush_timer is not None:
            self._flush_timer.cancel()
            self._flush_timer = None
        pending, self._pending = self._pending, {}
        rows = []
        for sid, values in pending.items():
            session = self.table.get(sid)
            if session is not None:
                height, width = session.size
                rows.append(
                    (sid, {**values, "rows": height, "cols": width, "last_screen": json.dumps(session.lines())})
                )
        if rows:
            try:
                self.registry.update_many(rows)
            except Exception:  # the registry must never take the engine down with it
                log.exception("could not update the session registry %s", self.registry.path)
