"""Starting a session, one way for all three ways in: a new session (create), a pane a previous
server left (adopt, at restore), a lost session's agent again (resume).

What to start is checked before any session exists (``plan``), so a refused launch leaves
nothing behind; a command the host cannot start still gives a session, ``exited`` with the
reason, so the caller can read what went wrong. The spawn itself is the host's and never
blocks the event loop (``PaneHost.spawn`` is awaited).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import secrets
import sys
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, replace

from ..backends import make_screen
from ..errors import Conflict, InvalidRequest
from ..hosts.base import HostKind, LaunchRefused, LaunchSpec, PaneHost, SpawnError
from ..integrations import Integration, hooked, integration
from ..manifest import CompiledManifest
from ..panes.pane import Pane
from ..procs.procinfo import is_shell
from ..procs.ptyproc import unencodable
from ..procs.wrappers import split_launch
from ..sinks.transcript import Transcript
from ..states import Decision, Source, State
from ..worktrees import WorktreeInfo
from . import _acp
from ._context import EngineContext
from ._feed import Feed
from ._sessions import AcpSession, AnySession, TerminalSession
from ._table import Sessions
from ._worktree import Worktrees
from .events import Created
from .models import Actor, SessionSpec

log = logging.getLogger("panewatch.engine")

SIZE_LIMITS = "rows must be 2..500 and cols 10..1000"
#: No variable of the server with this prefix reaches an agent (the token, the config path, the
#: webhook...): only the few its session sets.
SERVER_PREFIX = "PANEWATCH_"


def check_size(rows: int, cols: int) -> None:
    if not (2 <= rows <= 500 and 10 <= cols <= 1000):
        raise InvalidRequest(SIZE_LIMITS)


def expand_command(command: Sequence[str]) -> list[str]:
    """``{python}`` in a manifest's command is the interpreter running Panewatch."""
    return [sys.executable if part == "{python}" else part for part in command]


def runs_shell(command: list[str] | None) -> bool:
    """The session's command is a shell (after any wrappers): ``bash``, ``sh -c '…'``. What such
    a session runs (``sleep``, ``make``) is the shell's to read, never the generic manifest's."""
    if not command:
        return False
    agent = split_launch(command).agent
    return is_shell(os.path.basename(agent[0] if agent else command[0]))


def _ci_marker(name: str) -> bool:
    """A variable that tells programs they run in CI. A pane is an interactive terminal, and TUIs
    that see one inherited from the server (Gemini CLI) refuse to be interactive; a session's own
    ``env`` may still set them."""
    return name in ("CI", "CONTINUOUS_INTEGRATION") or name.startswith("CI_")


def agent_env(base: Mapping[str, str], extra: Mapping[str, str]) -> dict[str, str]:
    """An agent's environment: the server's without any ``PANEWATCH_*`` or CI marker, a real terminal's TERM,
    then what the session sets (its id, URL, report socket, the user's ``env``)."""
    env = {k: v for k, v in base.items() if not k.startswith(SERVER_PREFIX) and not _ci_marker(k)}
    env.update({"TERM": "xterm-256color", "COLORTERM": "truecolor"})
    env.update(extra)
    return env


@dataclass(frozen=True)
class Plan:
    """A launch checked before anything exists: what to start, on which host, with which hooks."""

    sid: str
    spec: SessionSpec
    argv: list[str]  # what starts (the hooks added)
    launched: list[str]  # the same before the hooks: what a resume starts again
    env: dict[str, str]
    host: PaneHost
    integration: Integration | None
    worktree: WorktreeInfo | None = None  # the git worktree it starts in (its cwd)


class Launcher:
    """Plans launches and starts them: the one path from a request to a running session."""

    def __init__(self, ctx: EngineContext, table: Sessions, feed: Feed, worktrees: Worktrees) -> None:
        self.ctx, self.table, self.feed, self.worktrees = ctx, table, feed, worktrees
        #: one event per launch under way, set once its process is known (or it failed)
        self._starting: set[asyncio.Event] = set()

    async def under_way(self) -> None:
        """Returns once every launch under way now has its process known. An agent runs before
        its host says which process it is (tmux answers after the pane's program started), so
        its first hook may arrive before then: the report socket waits here, not refuse it."""
        pending = list(self._starting)
        if pending:
            await asyncio.gather(*(each.wait() for each in pending))

    @contextlib.contextmanager
    def _launching(self) -> Iterator[None]:
        done = asyncio.Event()
        self._starting.add(done)
        try:
            yield
        finally:
            self._starting.discard(done)
            done.set()

    def new_id(self) -> str:
        prefix = self.ctx.options.id_prefix
        sid = prefix + secrets.token_hex(4)
        while sid in self.table:
            sid = prefix + secrets.token_hex(4)
        return sid

    # -- what to start ---------------------------------------------------------------------------
    def command_of(self, spec: SessionSpec) -> tuple[list[str], CompiledManifest | None]:
        """The argv to start and the agent's manifest; InvalidRequest for what cannot be launched."""
        store = self.ctx.store
        if spec.host == HostKind.acp:
            argv = _acp.launch_argv(spec)  # ACP agents have no screen rules: no manifest
            manifest = None
        else:
            manifest = store.get(spec.agent) if spec.agent else None
            if spec.agent and manifest is None:
                raise InvalidRequest(f"unknown agent {spec.agent!r} (known: {', '.join(store.agents())})")
            if spec.command:
                argv = list(spec.command)
            elif manifest is not None and manifest.manifest.command:
                argv = expand_command(manifest.manifest.command)
            else:
                raise InvalidRequest("give a command, or an agent whose manifest has a launch command")
        if (why := unencodable(argv, spec.cwd, spec.env)) is not None:
            raise InvalidRequest(why)  # before any session exists: all or nothing
        if spec.cwd and not os.path.isdir(spec.cwd):
            raise InvalidRequest(f"cwd {spec.cwd!r} is not a folder")
        return argv, manifest

    def plan(self, spec: SessionSpec, *, sid: str | None = None, argv: list[str] | None = None) -> Plan:
        """A new launch of ``spec`` (``argv``: this command instead of the spec's, as a resume
        gives it), hooks added, or ``InvalidRequest`` saying why it cannot be."""
        command, manifest = self.command_of(spec)
        check_size(spec.rows, spec.cols)
        host = self.ctx.hosts.get(spec.host)
        sid = sid or self.new_id()
        chosen = integration(manifest.manifest.hooks) if manifest is not None else None
        argv = list(argv) if argv is not None else command
        launched = list(argv)
        # no report token here: any pane of this user can read another's environment; hooks
        # report over the report socket, found by process ancestry (``agent_roots``)
        reach = self.ctx.reach
        env = agent_env(os.environ, {**spec.env, "PANEWATCH_SESSION": sid, "PANEWATCH_URL": reach.url, **reach.env})
        if spec.hooks and chosen is not None and manifest is not None:
            argv, env = hooked(chosen, manifest.manifest.processes, argv, env)
        return Plan(sid, spec, argv, launched, env, host, chosen)

    def new_session(
        self, sid: str, spec: SessionSpec, argv: list[str], host: HostKind, chosen: Integration | None
    ) -> AnySession:
        """The session object a launch of this kind keeps (not started, not in the table)."""
        if host == HostKind.acp:
            return AcpSession(sid, spec, argv, host, self.ctx.wall, program=os.path.basename(argv[0]))
        feed = self.feed
        screen = make_screen(self.ctx.backend, spec.rows, spec.cols, reply=lambda data: feed.reply(sid, data))
        pane = Pane(
            screen,
            agent=spec.agent,
            clock=self.ctx.clock.time,
            wall=self.ctx.wall,
            runs_shell=runs_shell(spec.command),
        )
        return TerminalSession(sid, spec, argv, host, pane, chosen)

    # -- starting --------------------------------------------------------------------------------
    async def create(self, spec: SessionSpec, actor: Actor) -> AnySession:
        """A new session; with ``spec.worktree``, in a git worktree added for it first (the rest of
        the launch checked before, so a refused launch adds no worktree)."""
        if spec.worktree is None:
            return await self.start(self.plan(spec), actor)
        if spec.cwd:
            raise InvalidRequest("give cwd or worktree, not both: a worktree session starts in its worktree")
        checked = self.plan(spec)
        wt = await self.worktrees.add(spec.worktree)
        plan = replace(self.plan(replace(spec, cwd=wt.path), sid=checked.sid), worktree=wt)
        try:
            session = await self.start(plan, actor)
        except BaseException:
            await self.worktrees.undo(wt)
            raise
        self.worktrees.added(session, actor)
        return session

    async def start(self, plan: Plan, actor: Actor, *, replacing: AnySession | None = None) -> AnySession:
        """Spawn ``plan``; the running session (or an exited one saying why). ``replacing``: a
        lost session this launch takes the place of (resume): it stays as it was when the
        host cannot start the agent, and ``Conflict`` says why."""
        with self._launching():
            return await self._start(plan, actor, replacing)

    async def _start(self, plan: Plan, actor: Actor, replacing: AnySession | None) -> AnySession:
        session = self.new_session(plan.sid, plan.spec, plan.argv, plan.host.kind, plan.integration)
        session.launched, session.worktree = plan.launched, plan.worktree
        if replacing is not None:  # the same session, on a new pane and with a new report token
            session.name, session.cwd, session.created = replacing.name, replacing.cwd, replacing.created
            session.agent_session_id, session.launched = replacing.agent_session_id, replacing.launched
            session.worktree = replacing.worktree
        self.feed.track(session, read=False)  # read once its process runs (``running``)
        start = LaunchSpec(plan.sid, tuple(plan.argv), session.cwd, plan.env, plan.spec.rows, plan.spec.cols)
        try:
            session.handle = await plan.host.spawn(start, self.feed.sink(session))
        except LaunchRefused as exc:  # a command no sandbox can hold: the request's fault, no session
            self._put_back(session, replacing)
            if replacing is None:
                raise InvalidRequest(str(exc)) from None
            raise Conflict(f"could not resume: {exc}", replacing.decision) from None
        except SpawnError as exc:
            if replacing is None:
                self._failed(session, str(exc), actor)
                return session
            self._put_back(session, replacing)
            raise Conflict(f"could not resume: {exc}", replacing.decision) from None
        except BaseException:
            self._put_back(session, replacing)  # all or nothing: no session without its process
            raise
        log.info(
            "started %s (pid %s, agent %s) for %s",
            plan.argv[0],
            session.handle.pid if session.handle else None,
            plan.spec.agent or "-",
            actor,
            extra={"session": plan.sid},
        )
        self.running(session, actor, announce=replacing is None)
        return session

    def _put_back(self, session: AnySession, old: AnySession | None) -> None:
        self.feed.untrack(session)
        if old is not None:
            self.feed.track(old)

    async def attach(self, session: AnySession, host: PaneHost, ref: str, actor: Actor) -> bool:
        """Take over the pane a previous server left at ``ref`` for ``session`` (tracked by the
        caller); False when it is gone. Its screen comes first, then the live stream."""
        with self._launching():
            return await self._attach(session, host, ref, actor)

    async def _attach(self, session: AnySession, host: PaneHost, ref: str, actor: Actor) -> bool:
        handle = await host.adopt(ref, session.id, self.feed.sink(session))
        if handle is None:
            return False
        session.handle = handle
        log.info("adopted its %s pane %s (pid %s)", host.kind, handle.ref, handle.pid, extra={"session": session.id})
        self.running(session, actor, announce=True, continues=True)
        return True

    def running(self, session: AnySession, actor: Actor, *, announce: bool, continues: bool = False) -> None:
        """A session whose host handle is live: record it, read its foreground, announce it, and
        decide its state (``continues``: an adopted pane, read now; else the launch's own)."""
        self.feed.read(session)
        if isinstance(session, TerminalSession):
            assert session.handle is not None
            self.record(session, continues=continues)
            self.feed.sample_foreground(session)
        if announce:  # an adopted pane was brought back, not created by a decision now
            self.ctx.hub.publish(Created(session.info(), actor, restored=continues))
        if continues:
            if isinstance(session, TerminalSession) and not session.pane.exited:
                self.feed.classify(session)  # the right state now, not a sweep later
        else:
            self.table.apply(session, session.decision, force=True)

    def record(self, session: TerminalSession, *, continues: bool = False) -> None:
        """Start the session's asciicast recording, when recordings are on (``continues``: an
        adopted session's recording goes on in its file)."""
        folder = self.ctx.options.transcripts
        if folder is None:
            return
        rows, cols = session.size
        recording = Transcript(
            folder / f"{session.id}.cast",
            rows=rows,
            cols=cols,
            max_bytes=self.ctx.options.transcript_max_bytes,
            title=session.name,
            command=session.argv,
            session=session.id,
            resume=continues,
            loop=asyncio.get_running_loop(),
        )
        session.transcript = recording
        self.feed.output_sinks.setdefault(session.id, []).append(recording.output)

    def _failed(self, session: AnySession, error: str, actor: Actor) -> None:
        """The host could not start it: an exited session that says why."""
        log.warning("could not start: %s", error, extra={"session": session.id})
        self.feed.read(session)
        session.error = error
        if isinstance(session, TerminalSession):
            session.pane.set_exit(127)
            session.pane.screen.feed(f"panewatch: {error}\r\n".encode())
            decision = session.pane.classify(self.ctx.store, self.ctx.options.report_freshness)
        else:
            session.shown = [f"panewatch: {error}"]
            decision = Decision(State.exited, Source.exit, "exit code 127", exit_code=127)
        self.ctx.hub.publish(Created(session.info(), actor))
        self.table.apply(session, decision)
