"""What a restart keeps: every session in the registry, written from the engine's own events,
and the sessions a previous server left, restored when the next one starts.

A restored session keeps its id, name, folder and report token (its hash: the agent still has
the token itself). On a host whose panes survive the server (tmux) the agent is adopted as it is,
screen and all; otherwise, or when its pane is gone, it is shown ``lost`` with its last screen and
the reason, and can be resumed when its manifest says how.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import secrets
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from .clock import Timer
from .events import Created, Deleted, Output, Reported, StateChanged
from .hosts.base import HostError, LaunchSpec, SpawnError
from .integrations import hooked, integration
from .launch import new_pane
from .registry import Record, Registry, hash_token, token_matches
from .resume import ResumeError, agent_session_id, resume_argv
from .session import Session, SessionSpec, agent_env, expand_command
from .states import Decision, Source, State

if TYPE_CHECKING:
    from .engine import Engine

log = logging.getLogger("panewatch.keeper")

#: How often changed screens are written to the registry (a killed server loses at most this much).
SCREEN_SAVE_S = 2.0
#: How long a state change may wait to be written with the others (same: lost on a kill -9).
STATE_SAVE_S = 0.5
LOST_HOST_GONE = "its pane is gone (the tmux server or the machine restarted)"
LOST_NOT_KEPT = "the {kind} host's agents end with the server that started them"
NO_REGISTRY = {"possible": False, "why": "resume needs the session registry (the state folder)"}


class Keeper:
    """The registry's writer (an engine event sink) and the restorer of a previous run."""

    def __init__(self, registry: Registry) -> None:
        self.registry = registry
        self.engine: Engine | None = None
        self._unsubscribe: Any = None
        self._known: set[str] = set()
        self._pending: dict[str, dict[str, Any]] = {}
        self._flush_handle: Timer | None = None

    # -- recording ---------------------------------------------------------------------------
    def bind(self, engine: Engine) -> None:
        self.engine = engine
        self._unsubscribe = engine.subscribe(self._on_event)
        self._saver = asyncio.get_running_loop().create_task(self._save_screens())

    async def _save_screens(self) -> None:
        """Every few seconds, the screens that changed: what a lost session will still show after
        a killed server (a state change alone misses output that did not change the state)."""
        saved: dict[str, int] = {}
        while True:
            await asyncio.sleep(SCREEN_SAVE_S)
            assert self.engine is not None
            try:
                sessions = self.engine.panes.sessions
            except Exception:
                continue
            changed = []
            for sid, session in list(sessions.items()):
                seq = session.pane.screen.seq
                if saved.get(sid) != seq and sid in self._known:
                    saved[sid] = seq
                    changed.append((sid, json.dumps(session.pane.screen.lines())))
            for sid in list(saved):
                if sid not in sessions:
                    del saved[sid]
            if changed:
                try:
                    self.registry.save_screens(changed)
                except Exception:
                    log.exception("could not save screens to %s", self.registry.path)

    def close(self) -> None:
        self.flush()
        saver = getattr(self, "_saver", None)
        if saver is not None:
            saver.cancel()
        if self._unsubscribe is not None:
            self._unsubscribe()
            self._unsubscribe = None
        self.registry.close()

    def _session(self, sid: str) -> Session | None:
        assert self.engine is not None
        return self.engine.panes.sessions.get(sid)

    def _on_event(self, event: object) -> None:
        if isinstance(event, Output):  # by far the most frequent: nothing to keep
            return
        try:
            if isinstance(event, Created):
                self._created(event.session["id"])
            elif isinstance(event, StateChanged):
                self._state(event)
            elif isinstance(event, Deleted):
                self._known.discard(event.session)
                self._pending.pop(event.session, None)
                self.registry.remove(event.session)
            elif isinstance(event, Reported):
                found = agent_session_id(event.payload)
                session = self._session(event.session)
                if found and session is not None and session.memo.get("agent_session_id") != found:
                    session.memo["agent_session_id"] = found
                    self.registry.set_agent_session(event.session, found)
        except Exception:  # the registry must never take the engine down with it
            log.exception("could not update the session registry %s", self.registry.path)

    def _created(self, sid: str) -> None:
        session = self._session(sid)
        if session is None or sid in self._known:
            return
        self._known.add(sid)
        assert self.engine is not None
        handle = session.handle
        self.registry.add(
            Record(
                id=sid,
                name=session.name,
                command=list(session.argv),
                cwd=session.cwd,
                token_hash=session.memo.get("token_hash") or hash_token(session.report_token),
                host_kind=session.host,
                host_ref=handle.ref if handle is not None else None,
                rows=session.pane.screen.rows,
                cols=session.pane.screen.cols,
                agent=session.spec.agent,
                created=session.created,
                agent_session_id=session.memo.get("agent_session_id"),
                state=str(session.pane.decision.state),
                since=session.pane.decision.since,
                why=session.pane.decision.why,
                hooks=session.spec.hooks,
            )
        )

    def _state(self, event: StateChanged) -> None:
        session = self._session(event.session)
        if session is None:
            return
        if event.session not in self._known:
            self._created(event.session)
        # kept for the next flush: a state change is one row in a transaction every
        # ``STATE_SAVE_S``, not a write of its own on the engine's read path
        self._pending[event.session] = {
            "state": str(event.state),
            "since": event.at,
            "why": event.why,
            "exit_code": event.exit_code,
        }
        if self._flush_handle is None:
            assert self.engine is not None
            clock = self.engine.panes.clock  # the engine's: a test moves it by hand
            self._flush_handle = clock.call_at(clock.time() + STATE_SAVE_S, self.flush)

    def flush(self) -> None:
        """Write the state changes kept since the last flush, each with its screen as it is now."""
        if self._flush_handle is not None:
            self._flush_handle.cancel()
            self._flush_handle = None
        pending, self._pending = self._pending, {}
        rows = []
        for sid, values in pending.items():
            session = self._session(sid)
            if session is not None:
                screen = session.pane.screen
                rows.append(
                    (
                        sid,
                        {**values, "rows": screen.rows, "cols": screen.cols, "last_screen": json.dumps(screen.lines())},
                    )
                )
        if rows:
            try:
                self.registry.update_many(rows)
            except Exception:  # the registry must never take the engine down with it
                log.exception("could not update the session registry %s", self.registry.path)

    # -- restoring ---------------------------------------------------------------------------
    async def restore(self) -> None:
        """Every registry session back under its id: adopted where its pane lives, else lost."""
        assert self.engine is not None
        records = self.registry.all()
        for each in self.engine.hosts.values():
            remove_orphans = getattr(each, "remove_orphans", None)
            if remove_orphans is None:
                continue
            for sid in await remove_orphans({r.id for r in records}):
                log.warning(
                    "ended an agent window the registry did not know (a server killed while starting it)",
                    extra={"session": sid},
                )
        if not records:
            return
        results = await asyncio.gather(*(self._restore(r) for r in records), return_exceptions=True)
        adopted = sum(1 for r in results if r is True)
        for record, result in zip(records, results, strict=True):
            if isinstance(result, BaseException):
                log.warning("could not restore: %s", result, extra={"session": record.id})
        log.info(
            "restored %d sessions from %s: %d adopted, %d lost",
            len(records),
            self.registry.path,
            adopted,
            len(records) - adopted,
        )

    async def _restore(self, record: Record) -> bool:
        engine = self.engine
        assert engine is not None
        panes = engine.panes
        session = self._new_session(record)
        self._known.add(record.id)
        panes.add(session)
        host = engine.hosts.get(record.host_kind, engine.host)
        handle = None
        if record.host_kind == host.kind and host.survives_restart and record.host_ref:
            try:
                handle = await host.adopt(record.host_ref, record.id, panes.sink(session))
            except HostError as exc:
                log.warning("could not adopt its pane: %s", exc, extra={"session": record.id})
        if handle is None and record.state == "exited":
            self._show_exited(session, record)
            return False
        if handle is None:
            why = (
                LOST_HOST_GONE
                if record.host_kind == host.kind and host.survives_restart
                else LOST_NOT_KEPT.format(kind=record.host_kind)
            )
            self._show_lost(session, record, why)
            return False
        session.handle = handle
        session.pane.own_pid = handle.pid
        panes.record(session, resume=True)  # the recording goes on in the same file
        log.info("adopted its %s pane %s (pid %s)", host.kind, handle.ref, handle.pid, extra={"session": record.id})
        panes.sample_foreground(session)
        engine.hub.publish(Created(session.info()))
        if not session.pane.exited:
            panes.classify(session)  # the right state now, not a sweep later
        return True

    def _new_session(self, record: Record) -> Session:
        engine = self.engine
        assert engine is not None
        spec = SessionSpec(
            agent=record.agent,
            command=list(record.command),
            cwd=record.cwd,
            rows=record.rows,
            cols=record.cols,
            hooks=record.hooks,
            name=record.name,
        )
        manifest = engine.store.get(record.agent) if record.agent else None
        chosen = integration(manifest.manifest.hooks) if manifest is not None else None
        pane = new_pane(engine, record.id, spec)  # as a launch makes it
        session = Session(record.id, spec, list(record.command), pane, chosen, record.host_kind)
        session.created = record.created
        session.report_token = ""  # unknown: only its hash was kept
        session.memo["token_hash"] = record.token_hash
        if record.agent_session_id:
            session.memo["agent_session_id"] = record.agent_session_id
        return session

    def _show_exited(self, session: Session, record: Record) -> None:
        """It had exited before the restart: still exited, with its code and last screen."""
        assert self.engine is not None
        lines = json.loads(record.last_screen) if record.last_screen else []
        session.pane.screen.feed("\r\n".join(lines).encode())
        session.pane.set_exit(record.exit_code if record.exit_code is not None else -1)
        self.engine.hub.publish(Created(session.info()))
        self.engine.panes.apply(session, session.pane.classify(self.engine.store, self.engine.freshness))

    def _show_lost(self, session: Session, record: Record, why: str) -> None:
        assert self.engine is not None
        pane = session.pane
        lines = json.loads(record.last_screen) if record.last_screen else []
        pane.screen.feed("\r\n".join(lines).encode())
        pane.set_exit(None)
        session.error = why
        self.engine.hub.publish(Created(session.info()))
        self.engine.panes.apply(session, Decision(State.lost, Source.exit, why))
        log.info("lost: %s", why, extra={"session": session.id})

    # -- resume ------------------------------------------------------------------------------
    def _resume_argv(self, session: Session) -> list[str]:
        """The command that resumes this session's conversation, or ResumeError saying why not."""
        assert self.engine is not None
        manifest = self.engine.store.get(session.spec.agent) if session.spec.agent else None
        argv = resume_argv(
            expand_command(manifest.manifest.resume) if manifest else [],
            session.spec.agent,
            session.memo.get("agent_session_id"),
        )
        if (
            manifest is not None
            and session.argv
            and os.path.basename(session.argv[0]) in ({argv[0], *manifest.manifest.processes})
        ):
            argv[0] = session.argv[0]  # the same binary the session was launched with
        return argv

    def resume_offer(self, session: Session) -> dict[str, Any]:
        """What a lost session's card offers: ``possible``, and ``why`` not (the dashboard says it)."""
        try:
            self._resume_argv(session)
        except ResumeError as exc:
            return {"possible": False, "why": str(exc)}
        return {"possible": True, "why": None}

    async def resume(self, sid: str) -> dict[str, Any]:
        """Start a lost session's agent again on its conversation, same id, same folder. The
        session stays lost (and says why) when the agent cannot be started."""
        engine = self.engine
        assert engine is not None
        from .errors import Conflict, UnknownSession

        session = self._session(sid)
        if session is None:
            raise UnknownSession(f"no session {sid!r}")
        if not session.pane.lost:
            raise Conflict(
                f"only a lost session can be resumed (this one is {session.pane.decision.state})", session.pane.decision
            )
        manifest = engine.store.get(session.spec.agent) if session.spec.agent else None
        try:
            argv = self._resume_argv(session)
        except ResumeError as exc:
            raise Conflict(str(exc), session.pane.decision) from None
        chosen = integration(manifest.manifest.hooks) if manifest is not None else None
        host = engine.host
        ensure = getattr(host, "ensure_running", None)
        try:
            if ensure is not None:
                await ensure()  # the tmux server was killed: a new one for the resumed agent
        except HostError as exc:
            raise Conflict(f"could not resume: {exc}", session.pane.decision) from None
        panes = engine.panes
        rows, cols = session.pane.screen.rows, session.pane.screen.cols
        pane = new_pane(engine, sid, replace(session.spec, rows=rows, cols=cols))
        token = secrets.token_urlsafe(24)
        # no report token in its environment (any pane of this user could read it): its hooks
        # report over the report socket, found by process ancestry (engine.agent_roots)
        env = agent_env(
            os.environ,
            {**session.spec.env, "PANEWATCH_SESSION": sid, "PANEWATCH_URL": engine.service_url, **engine.agent_vars},
        )
        if session.spec.hooks and chosen is not None and manifest is not None:
            argv, env = hooked(chosen, manifest.manifest.processes, argv, env)
        try:
            handle = host.spawn(LaunchSpec(sid, tuple(argv), session.cwd, env, rows, cols), panes.sink(session))
        except SpawnError as exc:
            raise Conflict(f"could not resume: {exc}", session.pane.decision) from None
        panes.scheduler.forget(sid)
        session.pane, session.argv, session.error, session.handle = pane, argv, None, handle
        session.host = host.kind
        session.report_token = token
        session.memo["token_hash"] = hash_token(token)
        panes.scheduler.add(sid, pane)
        pane.own_pid = handle.pid
        self.registry.update(sid, host_kind=host.kind, host_ref=handle.ref, token_hash=session.memo["token_hash"])
        log.info("resumed %s (pid %s)", " ".join(argv[:5]), handle.pid, extra={"session": sid})
        panes.sample_foreground(session)
        panes.apply(session, pane.decision, force=True)
        return session.info()


def report_token_matches(session: Session, presented: str) -> bool:
    """A restored session knows only its token's hash; a new one knows the token."""
    if session.report_token:
        return secrets.compare_digest(presented.encode(), session.report_token.encode())
    stored = session.memo.get("token_hash")
    return isinstance(stored, str) and bool(stored) and token_matches(presented, stored)
