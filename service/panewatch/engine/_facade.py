"""The local engine: ``EngineAPI`` over this server's own sessions.

The façade builds its parts when it starts (one context for all: the manifests, the hub, the
notifier, the clocks, the hosts, the options) and answers every call through them; no part
holds the façade. Read models are the typed ones of ``models.py``.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import asdict
from pathlib import Path
from typing import Any

from ..access.validation import NAME_MAX, clean_text
from ..backends import choose
from ..clock import Clock, LoopClock
from ..errors import Conflict, InvalidRequest, Unavailable, UnknownSession
from ..hosts.base import HostError, HostKind, PaneHost
from ..integrations import read_report
from ..manifest import ManifestStore
from ..panes.signals import Report
from ..policy import PolicyStore
from ..procs.procinfo import Program, program_name
from ..registry import Registry
from ..sinks import transcript as transcripts
from ..sinks.notify import Notifier
from ..states import State
from ..worktrees import Changes
from . import _acp, _streams
from ._context import EngineContext, Hosts, Reach
from ._options import EngineOptions
from ._parts import Parts, build_parts
from ._restore import info_of
from ._sessions import AcpSession, AnySession, TerminalSession
from ._views import agents_view, explain_view, prompt_view, screen_view
from .contract import ReportDesk, TerminalChannel
from .events import Deleted, EventHub, EventStream, Listener, Notified, Renamed, Reported, Snapshot
from .models import (
    Actor,
    AgentList,
    AnswerResult,
    Cancelled,
    ConversationView,
    Deletion,
    EngineStats,
    Explanation,
    Prompt,
    ScreenFrame,
    ScreenView,
    Sent,
    SessionInfo,
    SessionSpec,
)

log = logging.getLogger("panewatch.engine")


class Engine:
    """All sessions of one service, behind ``EngineAPI``."""

    def __init__(
        self,
        store: ManifestStore,
        *,
        host: PaneHost | None = None,
        hosts: Mapping[HostKind, PaneHost] | None = None,
        options: EngineOptions | None = None,
        notifier: Notifier | None = None,
        clock: Clock | None = None,
        wall: Callable[[], float] = time.time,
        programs: Callable[[int], Program | None] = program_name,
        registry: Registry | None = None,
        policy: PolicyStore | None = None,
    ) -> None:
        self.options, self.policy = options or EngineOptions(), policy or PolicyStore()
        # a backend that is not installed fails here, not at the first session; "auto" is decided here
        self.backend, why = choose(self.options.backend)
        log.info("screen backend %s (%s)", self.backend, why)
        self.store = store
        self.hosts = Hosts(host, hosts)
        self.hub = EventHub()
        self.notifier = notifier or Notifier()
        self.notifier.subscribe(lambda n: self.hub.publish(Notified(asdict(n))))
        self._reach = Reach(self.options.service_url)
        self._clock, self._wall, self._programs, self._registry = clock, wall, programs, registry
        self._parts: Parts | None = None
        self._tasks: list[asyncio.Task[Any]] = []

    @property
    def reports(self) -> ReportDesk:
        return self

    @property
    def local(self) -> Engine:
        """This node's engine: itself."""
        return self

    @property
    def _p(self) -> Parts:
        if self._parts is None:
            raise Unavailable("the engine is not running")
        return self._parts

    # -- lifecycle -------------------------------------------------------------------------
    async def prepare(self) -> None:
        """Nothing to join: a lone server is ready once it is built."""

    def _build(self, clock: Clock) -> Parts:
        ctx = EngineContext(
            self.store, self.hub, self.notifier, clock, self._wall, self._programs, self.options, self.backend,
            self.hosts, self._reach,
        )  # fmt: skip
        return build_parts(ctx, self._registry, self.policy)

    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        parts = self._parts = self._build(self._clock or LoopClock(loop))
        for each in self.hosts:
            await each.start()
        if parts.restorer is not None:
            await parts.restorer.restore()  # same ids; adopted where their panes live, else lost
        parts.feed.scheduler.start()
        self._tasks.append(loop.create_task(parts.feed.reload_manifests(self.options.manifest_check_s)))
        self._tasks.append(loop.create_task(parts.policy.reload(self.options.manifest_check_s)))

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks.clear()
        if self._parts is not None:
            await self._parts.policy.stop()
            self._parts.terminals.close()
            self._parts.guard.keys.flush_all()
            await self._close_all(self._parts)
        for each in self.hosts:
            await each.stop()
        if self._parts is not None and self._parts.keeper is not None:
            self._parts.keeper.close()
        await self.notifier.aclose()

    async def _close_all(self, parts: Parts) -> None:
        """The server stops: agents end with it, unless their host keeps them for the next one."""
        parts.feed.scheduler.stop()
        ending = []
        for session in parts.table.values():
            host = self.hosts.by_kind.get(session.host)
            if host is not None and host.survives_restart:
                if session.handle is not None:
                    session.handle.close()
                if isinstance(session, TerminalSession) and session.transcript:
                    ending.append(session.transcript.aclose())
            else:
                ending.append(self._end(session))
        await asyncio.gather(*ending)

    async def _end(self, session: AnySession) -> None:
        handle = session.handle
        if handle is not None:
            try:  # also once exited: what it left running ends with the session, and a host may
                # still hold the pane (tmux keeps a dead pane's window)
                await handle.terminate()
            except HostError as exc:
                log.warning("could not end the agent: %s", exc, extra={"session": session.id})
            handle.close()
        if isinstance(session, TerminalSession) and session.transcript:
            await session.transcript.aclose()

    async def reachable_at(self, url: str | None = None, env: Mapping[str, str] | None = None) -> None:
        if url is not None:
            self._reach.url = url
        self._reach.env.update(env or {})

    # -- sessions --------------------------------------------------------------------------
    async def create(self, spec: SessionSpec, *, actor: Actor, node: str | None = None) -> SessionInfo:
        """Launch a session; its info. A command that cannot start still gives a session,
        ``exited`` with the error, so the caller can read what went wrong."""
        if node:
            raise InvalidRequest(f"unknown node {node!r}: this server is not in a cluster (--cluster-url)")
        return (await self._p.launcher.create(spec, actor)).info()

    async def adopt(
        self,
        kind: HostKind,
        ref: str,
        spec: SessionSpec,
        *,
        sid: str,
        argv: list[str],
        actor: Actor,
        report_token: str | None = None,
    ) -> SessionInfo | None:
        """Take over a pane a previous server started on a host whose panes survive restarts
        (tmux), under its old id; its info, or None when the pane is gone."""
        p = self._p
        if sid in p.table:
            raise InvalidRequest(f"session {sid!r} exists already")
        host = self.hosts.get(kind)
        session = p.launcher.new_session(sid, spec, list(argv), host.kind, None)
        if report_token:
            session.report_token = report_token
        p.feed.track(session)
        if not await p.launcher.attach(session, host, ref, actor):
            p.feed.untrack(session)
            return None
        return session.info()

    def _session(self, sid: str) -> AnySession:
        found = self._p.table.get(sid)
        if found is None:
            raise UnknownSession(f"no session {sid!r}")
        return found

    def _view(self, session: AnySession) -> SessionInfo:
        """A session's info; a lost one also says whether Resume can bring it back, or why not."""
        return info_of(session, self._p.restorer)

    def info(self, sid: str) -> SessionInfo:
        """``get`` within one loop turn (the cluster's event handlers read it)."""
        return self._view(self._session(sid))

    def infos(self) -> list[SessionInfo]:
        """``list`` within one loop turn (snapshots of event streams)."""
        return [self._view(s) for s in self._p.table.values()]

    async def get(self, sid: str) -> SessionInfo:
        return self.info(sid)

    async def list(self) -> list[SessionInfo]:
        return self.infos()

    async def count(self) -> int:
        return len(self)

    def __contains__(self, sid: object) -> bool:
        return self._parts is not None and sid in self._parts.table

    def __len__(self) -> int:
        return 0 if self._parts is None else len(self._parts.table)

    async def delete(self, sid: str, *, actor: Actor, discard: bool = False) -> Deletion:
        """End the session's agent and forget it; its worktree goes too, when clean or ``discard``."""
        session, p = self._session(sid), self._p
        await p.launcher.worktrees.check_removable(session, discard=discard)
        p.guard.keys.flush(sid)
        await self._end(session)
        p.feed.untrack(session)
        exit_code = session.exit_code
        log.info("deleted (exit code %s) by %s", exit_code, actor, extra={"session": sid})
        self.notifier.forget(sid)
        # the worktree goes before the session is announced gone: a page that saw it deleted finds no folder
        lost = await p.launcher.worktrees.remove(session, actor, discard=discard)
        self.hub.publish(Deleted(sid, exit_code, actor))
        return Deletion(deleted=sid, exit_code=exit_code, discarded=lost)

    async def changes(self, sid: str) -> Changes:
        return await self._p.launcher.worktrees.changes(self._session(sid))

    async def rename(self, sid: str, name: str, *, actor: Actor) -> SessionInfo:
        """Give the session a new name (kept across restarts); its info."""
        session = self._session(sid)
        cleaned = clean_text(name, NAME_MAX).strip()
        if not cleaned:
            raise InvalidRequest("name: give a name with at least one visible character")
        session.name = cleaned
        info = self._view(session)
        self.hub.publish(Renamed(info, actor))
        return info

    async def resize(self, sid: str, rows: int, cols: int, *, actor: Actor) -> SessionInfo:
        session = self._session(sid)
        self._p.terminals.resize(session, rows, cols, actor)  # the pages watching it are told
        return session.info()

    async def resume(self, sid: str, *, actor: Actor) -> SessionInfo:
        """Start a lost session's agent again on its own conversation (manifest ``resume``)."""
        restorer = self._p.restorer
        if restorer is None:
            raise Conflict("resume needs the session registry (the state folder)", self._session(sid).decision)
        return await restorer.resume(sid, actor)

    # -- reports (ReportDesk) --------------------------------------------------------------
    def agent_roots(self) -> dict[int, str]:
        """``{pid: session id}`` of every running agent, adopted ones included: a report's caller
        belongs to the session whose agent is that process or one of its ancestors (``report_socket``)."""
        if self._parts is None:
            return {}
        return {
            s.handle.pid: s.id
            for s in self._parts.table.values()
            if s.handle is not None and s.handle.pid is not None and s.handle.alive
        }

    async def launches(self) -> None:
        """Returns once every launch under way now has its agent's process known."""
        if self._parts is not None:
            await self._parts.launcher.under_way()

    def report_token_matches(self, sid: str, presented: str) -> bool:
        """Whether ``presented`` is the session's report token (constant time; adopted: the kept hash)."""
        return self._session(sid).report_token_matches(presented)

    def report_token(self, sid: str) -> str:
        """The session's token for reports over TCP. Agents never get it (any pane of the user could
        read it from their environment): their hooks use the report socket, see ``agent_roots``."""
        return self._session(sid).report_token

    def state_of(self, sid: str) -> State:
        return self._session(sid).decision.state

    def report(self, sid: str, payload: dict[str, Any]) -> Report | None:
        """A hook payload or ``{"state": ...}`` for a session, applied at once (None: ignored)."""
        session = self._session(sid)
        now = self._p.ctx.clock.time()
        if not isinstance(session, TerminalSession):  # read, but an ACP agent's state is the protocol's
            report = read_report(payload, now, None, None, {})
        else:
            manifest = session.pane.manifest(self.store)
            hooks = manifest.manifest.hooks if manifest is not None else None
            report = read_report(payload, now, session.integration, hooks, session.memo)
        self.hub.publish(Reported(sid, payload, report.state if report else None, report.event if report else None))
        if report is not None and isinstance(session, TerminalSession):
            session.pane.set_report(report)
            if not session.pane.exited:
                self._p.feed.classify(session)
        return report

    # -- guarded writes --------------------------------------------------------------------
    async def send(self, sid: str, text: str, *, actor: Actor, enter: bool = True) -> Sent:
        """Type ``text`` (and Enter): refused when the pane is blocked at this moment."""
        return await self._p.guard.send(self._session(sid), text, actor, enter=enter)

    async def answer(
        self,
        sid: str,
        *,
        actor: Actor,
        option: int | str | None = None,
        keys: str | None = None,
        request: str | None = None,
        prompt_id: str | None = None,
        settle: float = 0.2,
        deadline: float = 3.0,
    ) -> AnswerResult:
        """Answer a prompt: only when blocked now (on the prompt ``prompt_id`` names, if given);
        then check that the prompt went away."""
        session, guard = self._session(sid), self._p.guard
        return await guard.answer(
            session, actor, option=option, keys=keys, request=request, settle=settle, deadline=deadline,
            prompt_id=prompt_id,
        )  # fmt: skip

    async def cancel(self, sid: str, *, actor: Actor) -> Cancelled:
        """Interrupt an ACP session's turn (``session/cancel``); 409 when no turn runs."""
        return self._p.guard.cancel(self._session(sid), actor)

    async def write_keys(self, sid: str, data: bytes, *, actor: Actor) -> None:
        """Raw keystrokes typed by a person in an interactive terminal (not guarded: they see
        the screen they type into), logged so that every input to an agent is accounted for."""
        self.keys(sid, data, actor)

    def keys(self, sid: str, data: bytes, actor: Actor) -> None:
        """``write_keys`` within one loop turn (a lab's evaluator types through it)."""
        self._p.guard.type_keys(self._session(sid), data, actor)

    async def terminal(self, sid: str, *, actor: Actor) -> TerminalChannel:
        """A page's terminal on the session: its history, a repaint, then live output; its keys
        typed through the guard's held-keys rule (``_terminal.Channel``)."""
        return self._p.terminals.open(sid, actor)

    # -- read models -----------------------------------------------------------------------
    async def screen(self, sid: str, *, styles: bool = False) -> ScreenView:
        """The visible screen, read fresh, with the state and the prompt's options."""
        return self.screen_now(sid, styles=styles)

    def screen_now(self, sid: str, *, styles: bool = False) -> ScreenView:
        """``screen`` within one loop turn."""
        session = self._session(sid)
        self._p.feed.classify(session)
        return screen_view(session, self.store, styles=styles)

    async def prompt(self, sid: str) -> Prompt | None:
        """The prompt on a blocked session (kind, options, id) as last read."""
        return self.prompt_now(sid)

    def prompt_now(self, sid: str) -> Prompt | None:
        """``prompt`` within one loop turn, without reading the screen again: a notification
        sink (Web Push) asks for it from inside the state change that made the pane blocked."""
        session = self._session(sid)
        return prompt_view(session, self.store, session.lines())

    async def explain(self, sid: str) -> Explanation:
        """Why the pane is in its state: every rule against the screen, and the other signals."""
        session = self._session(sid)
        decision = self._p.feed.classify(session)
        return explain_view(session, decision, self.store, self._p.ctx.clock.time())

    async def conversation(self, sid: str) -> ConversationView:
        """An ACP session's conversation (messages, tool calls, plan, pending permission)."""
        session = self._session(sid)
        if not isinstance(session, AcpSession):
            raise InvalidRequest("only ACP sessions have a conversation; read the screen instead")
        return _acp.conversation(session)

    async def agents(self) -> AgentList:
        """The loaded manifests, and every refused one with file, line and reason."""
        return agents_view(self.store)

    async def transcript(self, sid: str) -> tuple[Path, int] | None:
        """The session's recording file and its size (also of a deleted session's kept file)."""
        live = self._p.table.get(sid)
        recording = live.transcript if isinstance(live, TerminalSession) else None
        return await transcripts.recorded(recording, self.options.transcripts, sid)

    def snapshot(self) -> Snapshot:
        return Snapshot(self.infos())

    # -- streams ---------------------------------------------------------------------------
    def subscribe(self, listener: Listener) -> Callable[[], None]:
        """Every typed event, synchronously, output bytes included; returns the unsubscriber."""
        return self.hub.listen(listener)

    async def events(self, *, size: int = 1000, heartbeat: float | None = 15.0) -> EventStream:
        """State-level events as an async iterator: a snapshot, then each event; a lagging
        consumer gets a fresh snapshot instead of a growing queue. ``close()`` it when done."""
        return self.hub.stream(self.snapshot, size=size, heartbeat=heartbeat)

    async def screens(self, sid: str, *, interval: float = 0.1, styles: bool = False) -> AsyncIterator[ScreenFrame]:
        """Screen frames: a full one, then changed rows only, at most one per ``interval``,
        always the latest (a slow consumer skips frames, it never queues them)."""
        session = self._session(sid)
        return _streams.screen_frames(self._p.table, session, self.store, interval=interval, styles=styles)

    async def conversations(self, sid: str, *, interval: float = 0.1) -> AsyncIterator[ConversationView]:
        """The conversation, then again on every change (latest only, at most per ``interval``)."""
        session = self._session(sid)
        if not isinstance(session, AcpSession):
            raise InvalidRequest("only ACP sessions have a conversation")
        return _streams.conversations(self._p.table, session, interval=interval)

    # -- figures ---------------------------------------------------------------------------
    def backlog(self, sid: str) -> int:
        """Bytes of the session's output received but not yet emulated (0 once deleted)."""
        session = self._p.table.get(sid)
        return len(session.pane.pending) if isinstance(session, TerminalSession) else 0

    def fed(self, sid: str) -> int:
        """Bytes of the session's output emulated so far: what its screen shows (0 once deleted)."""
        session = self._p.table.get(sid)
        return session.pane.bytes_fed if isinstance(session, TerminalSession) else 0

    async def stats(self) -> EngineStats:
        """Every figure /metrics and the benchmark show; counters include deleted sessions."""
        p = self._p
        panes = [s.pane for s in p.table.values() if isinstance(s, TerminalSession)]
        sched, gone = p.feed.scheduler, p.table.gone
        return EngineStats(
            sessions=len(p.table),
            sessions_by_state=p.table.by_state(),
            transitions=dict(p.table.transitions),
            sweeps=sched.sweeps,
            sweep_seconds=list(sched.sweep_seconds),
            sweep_seconds_sum=sched.sweep_seconds_sum,
            bytes_read=gone["bytes_read"] + sum(pane.bytes_read for pane in panes),
            bytes_emulated=gone["bytes_fed"] + sum(pane.bytes_fed for pane in panes),
            screen_errors=gone["screen_errors"] + sum(pane.screen.errors for pane in panes),
            classifications=p.feed.classifications,
            notifications=self.notifier.sent,
            notifications_suppressed=self.notifier.suppressed,
            backlog=sched.backlog(),
            bytes_read_by_session={s.id: s.pane.bytes_read for s in p.table.values() if isinstance(s, TerminalSession)},
        )
