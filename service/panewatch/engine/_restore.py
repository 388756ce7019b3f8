"""The sessions a previous server left, brought back when the next one starts; a lost session's
agent started again on its own conversation (resume).

A restored session keeps its id, name, folder and report token (its hash: the agent still has
the token itself). On a host whose panes survive the server (tmux) the agent is adopted as it is,
screen and all; otherwise, or when its pane is gone, it is shown ``lost`` with its last screen and
the reason, and can be resumed when its manifest says how. Both go through the launcher, the one
path every session starts by.
"""

from __future__ import annotations

import asyncio
import json
import logging

from ..errors import Conflict, InvalidRequest, UnknownSession
from ..hosts.base import HostError, HostKind
from ..integrations import integration
from ..procs.resume import ResumeError, ResumeSpec, resume_argv
from ..registry import Record
from ..states import Decision, Source, State
from ..worktrees import WorktreeInfo
from ._context import EngineContext
from ._keeper import Keeper
from ._launch import Launcher, expand_command
from ._sessions import AnySession, TerminalSession
from ._table import Sessions
from .events import Acted, Action, Created
from .models import Actor, ActorKind, ResumeOffer, SessionInfo, SessionSpec

log = logging.getLogger("panewatch.keeper")

LOST_HOST_GONE = "its pane is gone (the tmux server or the machine restarted)"
LOST_NOT_KEPT = "the {kind} host's agents end with the server that started them"
NO_REGISTRY = ResumeOffer(possible=False, why="resume needs the session registry (the state folder)")
#: Who brings a previous run's sessions back (the events of the restore name it).
RESTORER = Actor(kind=ActorKind.node, id="restore", name="the session registry, at start")


def _kind(name: str) -> HostKind:
    """A registry row's host kind (a kind this version does not know reads as pty: it is lost anyway)."""
    try:
        return HostKind(name)
    except ValueError:
        return HostKind.pty


def info_of(session: AnySession, restorer: Restorer | None) -> SessionInfo:
    """A session's info; a lost one also says whether Resume can bring it back, or why not."""
    if session.decision.state != State.lost:
        return session.info()
    return session.info(restorer.offer(session) if restorer is not None else NO_REGISTRY)


class Restorer:
    """Restore at start, resume on request."""

    def __init__(self, ctx: EngineContext, table: Sessions, launcher: Launcher, keeper: Keeper) -> None:
        self.ctx, self.table, self.launcher, self.keeper = ctx, table, launcher, keeper

    # -- at start ----------------------------------------------------------------------------------
    async def restore(self) -> None:
        """Every registry session back under its id: adopted where its pane lives, else lost."""
        registry = self.keeper.registry
        records = registry.all()
        for host in self.ctx.hosts:
            for sid in await host.remove_orphans({r.id for r in records}):
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
            registry.path,
            adopted,
            len(records) - adopted,
        )

    async def _restore(self, record: Record) -> bool:
        session = self._session_of(record)
        self.keeper.known.add(record.id)
        self.launcher.feed.track(session)
        host = self.ctx.hosts.by_kind.get(session.host, self.ctx.hosts.default)
        kept = record.host_kind == host.kind and host.survives_restart
        if kept and record.host_ref:
            try:
                if await self.launcher.attach(session, host, record.host_ref, RESTORER):
                    return True
            except HostError as exc:
                log.warning("could not adopt its pane: %s", exc, extra={"session": record.id})
        if record.state == "exited":
            code = record.exit_code if record.exit_code is not None else -1
            self._show(
                session, record, Decision(State.exited, Source.exit, f"the process exited with code {code}"), code
            )
        else:
            why = LOST_HOST_GONE if kept else LOST_NOT_KEPT.format(kind=record.host_kind)
            session.error = why
            self._show(session, record, Decision(State.lost, Source.exit, why), None)
            log.info("lost: %s", why, extra={"session": session.id})
        return False

    def _session_of(self, record: Record) -> AnySession:
        spec = SessionSpec(
            agent=record.agent,
            command=list(record.command),
            cwd=record.cwd,
            rows=record.rows,
            cols=record.cols,
            env=dict(record.env),
            hooks=record.hooks,
            name=record.name,
        )
        manifest = self.ctx.store.get(record.agent) if record.agent else None
        chosen = integration(manifest.manifest.hooks) if manifest is not None else None
        session = self.launcher.new_session(record.id, spec, list(record.command), _kind(record.host_kind), chosen)
        session.created = record.created
        session.report_token = ""  # unknown: only its hash was kept
        session.token_hash = record.token_hash
        session.agent_session_id = record.agent_session_id
        session.launched = None if record.launched is None else list(record.launched)
        session.worktree = None if record.worktree is None else WorktreeInfo.model_validate(record.worktree)
        return session

    def _show(self, session: AnySession, record: Record, decision: Decision, code: int | None) -> None:
        """A session with no agent any more: its last screen, its exit code or why it is lost."""
        lines = json.loads(record.last_screen) if record.last_screen else []
        if isinstance(session, TerminalSession):
            session.pane.screen.feed("\r\n".join(lines).encode())
            session.pane.set_exit(code)
            if code is not None:  # read as the pane's own exit, as when it happened
                decision = session.pane.classify(self.ctx.store, self.ctx.options.report_freshness)
        else:
            session.shown = list(lines)
            if code is not None:
                decision = Decision(decision.state, decision.source, decision.why, exit_code=code)
        self.ctx.hub.publish(Created(session.info(), RESTORER, restored=True))
        self.table.apply(session, decision)

    # -- resume ------------------------------------------------------------------------------------
    def _resume_argv(self, session: AnySession) -> list[str]:
        """The command that resumes this session's conversation (its launch, the manifest's
        resume arguments in place, no hooks yet), or ResumeError saying why not."""
        manifest = self.ctx.store.get(session.spec.agent) if session.spec.agent else None
        if manifest is None:
            raise ResumeError(f"the {session.spec.agent or 'unknown'} agent has no resume command in its manifest")
        m = manifest.manifest
        resume = m.resume if isinstance(m.resume, ResumeSpec) else expand_command(m.resume)
        return resume_argv(
            session.launched,
            resume,
            agent=session.spec.agent,
            processes=m.processes,
            conversation=session.agent_session_id,
            command=expand_command(m.command),
        )

    def offer(self, session: AnySession) -> ResumeOffer:
        """What a lost session's card offers: ``possible``, and ``why`` not (the dashboard says it)."""
        try:
            self._resume_argv(session)
        except ResumeError as exc:
            return ResumeOffer(possible=False, why=str(exc))
        return ResumeOffer(possible=True, why=None)

    async def resume(self, sid: str, actor: Actor) -> SessionInfo:
        """Start a lost session's agent again on its conversation, same id, same folder. The
        session stays lost (and says why) when the agent cannot be started; a refused resume
        is announced too (``Acted`` with why: the ledger keeps it)."""
        try:
            return await self._resume(sid, actor)
        except Conflict as exc:
            session = self.table.get(sid)
            state = session.decision.state if session is not None else None
            agent = session.spec.agent if session is not None else None
            self.ctx.hub.publish(Acted(sid, Action.resume, actor, agent=agent, state=state, refused=str(exc)))
            raise

    async def _resume(self, sid: str, actor: Actor) -> SessionInfo:
        session = self.table.get(sid)
        if session is None:
            raise UnknownSession(f"no session {sid!r}")
        if session.decision.state != State.lost:
            raise Conflict(
                f"only a lost session can be resumed (this one is {session.decision.state})", session.decision
            )
        try:
            argv = self._resume_argv(session)
        except ResumeError as exc:
            raise Conflict(str(exc), session.decision) from None
        rows, cols = session.size
        spec = SessionSpec(**{**session.spec.__dict__, "rows": rows, "cols": cols, "host": None})
        try:
            plan = self.launcher.plan(spec, sid=sid, argv=argv)
        except InvalidRequest as exc:
            raise Conflict(f"could not resume: {exc}", session.decision) from None
        resumed = await self.launcher.start(plan, actor, replacing=session)
        log.info("resumed %s by %s", " ".join(plan.argv[:5]), actor, extra={"session": sid})
        agent = resumed.spec.agent
        self.ctx.hub.publish(Acted(sid, Action.resume, actor, " ".join(plan.argv[:5]), agent=agent, took=True))
        return resumed.info()
