"""The engine's façade: the one surface the API, metrics, the lab and the benchmark use.

Sessions are created, read, written and deleted here; everything below (panes, hosts, the
scheduler, integrations) is reached only through these methods, the typed events of
``events.py`` and the errors of ``errors.py``. Read models are plain JSON-ready dicts.
"""

from __future__ import annotations

import asyncio
import logging
import os
import secrets
import time
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import asdict
from pathlib import Path
from typing import Any

from . import acp_sessions, guard, launch
from . import transcript as transcripts
from .backends import choose
from .clock import Clock, LoopClock
from .errors import Conflict, InvalidRequest, Unavailable, UnknownSession
from .events import Created, Deleted, EventHub, EventStream, Listener, Notified, Reported, Snapshot
from .guard import AnswerResult, prompt_reacted
from .hosts.base import LaunchSpec, PaneHost, SpawnError
from .integrations import hooked, integration, read_report
from .keeper import Keeper, report_token_matches
from .manifest import ManifestStore
from .notify import Notifier
from .panes import Panes
from .procinfo import Program, program_name
from .scheduler import Mode, Timing
from .session import Session, SessionSpec, agent_env
from .signals import Report
from .states import Decision, State
from .streams import output_stream, screen_frames
from .views import agents_view, explain_view, screen_view

__all__ = ["AnswerResult", "Engine", "SessionSpec", "prompt_reacted"]

log = logging.getLogger("panewatch.engine")


class Engine:
    """All sessions of one service, behind a narrow surface."""

    def __init__(
        self,
        store: ManifestStore,
        *,
        host: PaneHost | None = None,
        hosts: Mapping[str, PaneHost] | None = None,
        sweep_ms: int = 700,
        mode: Mode = "sweep",
        settle_ms: int = 40,
        cap_ms: int = 150,
        change_bytes: int = 256,
        report_freshness: float = 60.0,
        notifier: Notifier | None = None,
        service_url: str = "",
        manifest_check_s: float = 1.0,
        backend: str = "auto",
        transcripts: Path | str | None = None,
        transcript_max_bytes: int = 50 * 1024 * 1024,
        clock: Clock | None = None,
        wall: Callable[[], float] = time.time,
        agent_vars: Mapping[str, str] | None = None,
        programs: Callable[[int], Program | None] = program_name,
        keeper: Keeper | None = None,
    ) -> None:
        # a backend that is not installed fails here, not at the first session; "auto" is decided here
        backend, why = choose(backend)
        log.info("screen backend %s (%s)", backend, why)
        #: every host by kind; a session names one (``SessionSpec.host``), else ``host`` is used
        self.hosts, self.host = launch.hosts_of(host, hosts)
        self.store, self.backend, self.wall, self.programs = store, backend, wall, programs
        self.service_url = service_url
        #: variables every agent gets besides its session's (the server sets the report socket's path)
        self.agent_vars: dict[str, str] = dict(agent_vars or {})
        self.freshness = report_freshness
        self.manifest_check_s = manifest_check_s
        self.timing = Timing(
            mode=mode,
            sweep_s=sweep_ms / 1000,
            settle_s=settle_ms / 1000,
            cap_s=cap_ms / 1000,
            change_bytes=change_bytes,
        )
        self.transcripts = Path(transcripts) if transcripts else None
        self.transcript_max_bytes = transcript_max_bytes
        self.hub = EventHub()
        self.notifier = notifier or Notifier()
        self.notifier.subscribe(lambda n: self.hub.publish(Notified(asdict(n))))
        self._clock = clock
        self.keeper = keeper  # the session registry: written from events, restored at start
        self._panes: Panes | None = None
        self._tasks: list[asyncio.Task[Any]] = []
        #: put before every new session id (a cluster node's name), so ids are unique across nodes
        self.id_prefix = ""

    # -- lifecycle -------------------------------------------------------------------------
    @property
    def panes(self) -> Panes:
        if self._panes is None:
            raise Unavailable("the engine is not running")
        return self._panes

    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        clock = self._clock or LoopClock(loop)
        self._panes = Panes(self, clock)
        for each in self.hosts.values():
            await each.start()
        if self.keeper is not None:
            self.keeper.bind(self)
            await self.keeper.restore()  # same ids; adopted where their panes live, else lost
        self._panes.scheduler.start()
        self._tasks.append(loop.create_task(self._panes.reload_manifests(self.manifest_check_s)))

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks.clear()
        if self._panes is not None:
            await self._panes.close_all()
        for each in self.hosts.values():
            await each.stop()
        if self.keeper is not None:
            self.keeper.close()
        await self.notifier.aclose()

    # -- sessions --------------------------------------------------------------------------
    def create(self, spec: SessionSpec) -> dict[str, Any]:
        """Launch a session; its info. A command that cannot start still gives a session,
        ``exited`` with the error, so the caller can read what went wrong."""
        acp = spec.host == acp_sessions.KIND
        argv, manifest = launch.command_of(self.store, spec)
        launch.check_size(spec.rows, spec.cols)
        host = self._host(spec.host)
        panes = self.panes
        sid = self.id_prefix + secrets.token_hex(4)
        while sid in panes.sessions:
            sid = self.id_prefix + secrets.token_hex(4)
        chosen = integration(manifest.manifest.hooks) if manifest is not None else None
        # no report token here: any pane of this user can read another's environment
        env = agent_env(
            os.environ, {**spec.env, "PANEWATCH_SESSION": sid, "PANEWATCH_URL": self.service_url, **self.agent_vars}
        )
        if spec.hooks and chosen is not None and manifest is not None:
            argv, env = hooked(chosen, manifest.manifest.processes, argv, env)
        pane = launch.new_pane(self, sid, spec, acp=acp, program=os.path.basename(argv[0]))
        session = Session(sid, spec, argv, pane, chosen, host.kind)
        start = LaunchSpec(sid, tuple(argv), session.cwd, env, spec.rows, spec.cols)
        panes.add(session)
        try:
            session.handle = host.spawn(start, panes.sink(session))
        except SpawnError as exc:
            panes.failed(session, str(exc))
            return session.info()
        except BaseException:
            panes.discard(session)  # all or nothing: no session without its process
            raise
        log.info(
            "started %s (pid %s, agent %s)", argv[0], session.handle.pid, spec.agent or "-", extra={"session": sid}
        )
        return self._running(session)

    def _running(self, session: Session) -> dict[str, Any]:
        """A session whose host handle is live: record, read the foreground, announce it."""
        assert session.handle is not None
        session.pane.own_pid = session.handle.pid
        self.panes.record(session)
        self.panes.sample_foreground(session)
        self.hub.publish(Created(session.info()))
        self.panes.apply(session, session.pane.decision, force=True)
        return session.info()

    def _host(self, kind: str | None) -> PaneHost:
        if kind is None:
            return self.host
        found = self.hosts.get(kind)
        if found is None:
            raise InvalidRequest(f"unknown host {kind!r} (configured: {', '.join(self.hosts)})")
        return found

    async def adopt(
        self, kind: str, ref: str, spec: SessionSpec, *, sid: str, argv: list[str], report_token: str | None = None
    ) -> dict[str, Any] | None:
        """Take over a pane a previous server started on a host whose panes survive restarts
        (tmux), under its old id; its info, or None when the pane is gone."""
        session = await launch.adopt(self, self._host(kind), ref, spec, sid=sid, argv=argv, report_token=report_token)
        return None if session is None else self._running(session)

    def _session(self, sid: str) -> Session:
        try:
            return self.panes.sessions[sid]
        except KeyError:
            raise UnknownSession(f"no session {sid!r}") from None

    def get(self, sid: str) -> dict[str, Any]:
        return self._session(sid).info()

    info = get

    def list(self) -> list[dict[str, Any]]:
        return [s.info() for s in self.panes.sessions.values()]

    def __contains__(self, sid: object) -> bool:
        return self._panes is not None and sid in self._panes.sessions

    def __len__(self) -> int:
        return 0 if self._panes is None else len(self._panes.sessions)

    async def delete(self, sid: str) -> dict[str, Any]:
        """End the session's agent and forget it; ``{"deleted": id, "exit_code": ...}``."""
        session = self._session(sid)
        await self.panes.remove(session)
        log.info("deleted (exit code %s)", session.pane.exit_code, extra={"session": sid})
        self.notifier.forget(sid)
        self.hub.publish(Deleted(sid, session.pane.exit_code))
        return {"deleted": sid, "exit_code": session.pane.exit_code}

    def resize(self, sid: str, rows: int, cols: int) -> dict[str, Any]:
        launch.check_size(rows, cols)
        session = self._session(sid)
        self.panes.resize(session, rows, cols)
        return session.info()

    # -- reports ---------------------------------------------------------------------------
    def agent_roots(self) -> dict[int, str]:
        """``{pid: session id}`` of every running agent, adopted ones included: a report's caller
        belongs to the session whose agent is that process or one of its ancestors (``report_socket``)."""
        if self._panes is None:
            return {}
        return {
            s.handle.pid: sid
            for sid, s in self._panes.sessions.items()
            if s.handle is not None and s.handle.pid is not None and s.handle.alive
        }

    def report_token_matches(self, sid: str, presented: str) -> bool:
        """Whether ``presented`` is the session's report token (constant time; adopted: the kept hash)."""
        return report_token_matches(self._session(sid), presented)

    async def resume(self, sid: str) -> dict[str, Any]:
        """Start a lost session's agent again on its own conversation (manifest ``resume``)."""
        if self.keeper is None:
            raise Conflict("resume needs the session registry (the state folder)", self._session(sid).pane.decision)
        return await self.keeper.resume(sid)

    def report_token(self, sid: str) -> str:
        """The session's token for reports over TCP. Agents never get it (any pane of the user could
        read it from their environment): their hooks use the report socket, see ``agent_roots``."""
        return self._session(sid).report_token

    def report(self, sid: str, payload: dict[str, Any]) -> Report | None:
        """A hook payload or ``{"state": ...}`` for a session, applied at once (None: ignored)."""
        session = self._session(sid)
        manifest = session.pane.manifest(self.store)
        hooks = manifest.manifest.hooks if manifest is not None else None
        report = read_report(payload, self.panes.clock.time(), session.integration, hooks, session.memo)
        self.hub.publish(Reported(sid, payload, report.state if report else None, report.event if report else None))
        if report is None:
            return None
        session.pane.set_report(report)
        if not session.pane.exited:
            self.panes.classify(session)
        return report

    # -- guarded writes --------------------------------------------------------------------
    async def send(self, sid: str, text: str, *, enter: bool = True) -> Decision:
        """Type ``text`` (and Enter): refused when the pane is blocked at this moment."""
        session = self._session(sid)
        if session.host == acp_sessions.KIND:
            return acp_sessions.send(session, text)  # session/prompt; Enter means nothing there
        return await guard.send(self.panes, session, text, enter=enter)

    async def answer(
        self,
        sid: str,
        *,
        option: int | str | None = None,
        keys: str | None = None,
        request: str | None = None,
        settle: float = 0.2,
        deadline: float = 3.0,
    ) -> AnswerResult:
        """Answer a prompt: only when blocked now; then check that the prompt went away.
        ACP sessions take an option id (or number) and, optionally, the permission request's id."""
        if (option is None) == (keys is None):
            raise InvalidRequest("give exactly one of option or keys")
        session = self._session(sid)
        if session.host == acp_sessions.KIND:
            if option is None:
                raise InvalidRequest("an ACP permission is answered with an option (its id or number), not keys")
            option_id, after = acp_sessions.answer(session, option, request)
            # the protocol confirms delivery: the request is settled the moment it is answered
            return AnswerResult(after.state != State.blocked, after.state, after.decided_by, 0.0, option_id)
        if isinstance(option, str):
            raise InvalidRequest("a terminal prompt's option is a number")
        return await guard.answer(self.panes, session, option=option, keys=keys, settle=settle, deadline=deadline)

    def cancel(self, sid: str) -> dict[str, Any]:
        """Interrupt an ACP session's turn (``session/cancel``); 409 when no turn runs."""
        session = self._session(sid)
        if session.host != acp_sessions.KIND:
            raise InvalidRequest("cancel is for ACP sessions; a terminal takes keys (Esc, Ctrl-C) via answer/send")
        decision = acp_sessions.cancel(session)
        return {"cancelled": True, **decision.as_dict()}

    def conversation(self, sid: str) -> dict[str, Any]:
        """An ACP session's conversation (messages, tool calls, plan, pending permission)."""
        session = self._session(sid)
        if session.host != acp_sessions.KIND:
            raise InvalidRequest("only ACP sessions have a conversation; read the screen instead")
        return acp_sessions.conversation(session)

    def conversations(self, sid: str, *, interval: float = 0.1) -> AsyncIterator[dict[str, Any]]:
        """The conversation, then again on every change (latest only, at most per ``interval``)."""
        session = self._session(sid)
        if session.host != acp_sessions.KIND:
            raise InvalidRequest("only ACP sessions have a conversation")
        return acp_sessions.conversations(self.panes, session, interval=interval)

    def write_keys(self, sid: str, data: bytes) -> None:
        """Raw keystrokes typed by a person in an interactive terminal (not guarded: they see
        the screen they type into), logged so that every input to an agent is accounted for."""
        session = self._session(sid)
        log.info("typed %d bytes by hand while %s", len(data), session.pane.decision.state, extra={"session": sid})
        guard.write(session, data)

    # -- read models -----------------------------------------------------------------------
    def screen(self, sid: str, *, styles: bool = False) -> dict[str, Any]:
        """The visible screen, read fresh, with the state and the prompt's options."""
        session = self._session(sid)
        self.panes.classify(session)
        return screen_view(session, self.store, styles=styles)

    def explain(self, sid: str) -> dict[str, Any]:
        """Why the pane is in its state: every rule against the screen, and the other signals."""
        session = self._session(sid)
        decision = self.panes.classify(session)
        return explain_view(session, decision, self.store, self.panes.clock.time())

    def agents(self) -> dict[str, Any]:
        """The loaded manifests, and every refused one with file, line and reason."""
        return agents_view(self.store)

    async def transcript(self, sid: str) -> tuple[Path, int] | None:
        """The session's recording file and its size (also of a deleted session's kept file)."""
        live = self.panes.sessions.get(sid)
        return await transcripts.recorded(live.transcript if live else None, self.transcripts, sid)

    def snapshot(self) -> Snapshot:
        return Snapshot(self.list())

    # -- streams ---------------------------------------------------------------------------
    def subscribe(self, listener: Listener) -> Callable[[], None]:
        """Every typed event, synchronously, output bytes included; returns the unsubscriber."""
        return self.hub.listen(listener)

    def events(self, *, size: int = 1000, heartbeat: float | None = 15.0) -> EventStream:
        """State-level events as an async iterator: a snapshot, then each event; a lagging
        consumer gets a fresh snapshot instead of a growing queue. ``close()`` it when done."""
        return self.hub.stream(self.snapshot, size=size, heartbeat=heartbeat)

    def screens(self, sid: str, *, interval: float = 0.1, styles: bool = False) -> AsyncIterator[dict[str, Any]]:
        """Screen frames: a full one, then changed rows only, at most one per ``interval``,
        always the latest (a slow consumer skips frames, it never queues them)."""
        session = self._session(sid)
        return screen_frames(self.panes, session, self.store, interval=interval, styles=styles)

    def output(self, sid: str, *, limit: int = 1 << 20) -> AsyncIterator[bytes]:
        """Raw bytes for a terminal client: a repaint of the screen now, then the live output;
        a consumer more than ``limit`` bytes behind gets a fresh repaint instead."""
        return output_stream(self.panes, self._session(sid), limit=limit)

    # -- figures ---------------------------------------------------------------------------
    def backlog(self, sid: str) -> int:
        """Bytes of the session's output received but not yet emulated (0 once deleted)."""
        session = self.panes.sessions.get(sid)
        return len(session.pane.pending) if session is not None else 0

    def stats(self) -> dict[str, Any]:
        """Every figure /metrics and the benchmark show; counters include deleted sessions."""
        return self.panes.stats()
