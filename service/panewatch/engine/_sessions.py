"""The two kinds of session, behind one protocol: a terminal (a pane read from its screen, fed
by the scheduler) and an ACP agent (a protocol client whose state is exact, whose record is its
conversation). The parts that differ by kind match on the class; none compares strings.

A session holds what was launched and how to reach it; it never starts or ends anything itself
(the launcher and the table do).
"""

from __future__ import annotations

import os
import secrets
import time
from collections.abc import Callable
from typing import Any, ClassVar, Protocol

from ..hosts.acp import AcpHandle
from ..hosts.base import HostKind, PaneHandle
from ..integrations import Integration
from ..panes.asks import Request, from_acp
from ..panes.pane import Pane
from ..panes.prompts import prompt_id
from ..registry import token_matches
from ..sinks.transcript import Transcript
from ..states import Decision, SessionKind, Source, State
from ..worktrees import WorktreeInfo
from .models import RequestView, ResumeOffer, SessionInfo, SessionSpec, TranscriptInfo


class Session(Protocol):
    """What every part may read of a session, whatever its kind."""

    kind: ClassVar[SessionKind]
    id: str
    spec: SessionSpec
    argv: list[str]
    host: HostKind
    name: str
    cwd: str
    created: float
    report_token: str
    token_hash: str | None
    agent_session_id: str | None
    launched: list[str] | None
    error: str | None
    worktree: WorktreeInfo | None

    @property
    def handle(self) -> PaneHandle | None: ...

    @property
    def decision(self) -> Decision: ...

    @property
    def exit_code(self) -> int | None:
        """The agent's exit status once it exited (negative: killed by that signal)."""

    @property
    def writable(self) -> bool: ...

    @property
    def size(self) -> tuple[int, int]: ...

    @property
    def seq(self) -> int:
        """Moves whenever what the session shows (``lines``) may have changed."""

    def lines(self) -> list[str]:
        """What the session shows now, as rows of text (its screen, or its conversation)."""

    def set_decision(self, decision: Decision) -> Decision | None:
        """Record a decision; the previous one when the state changed (``since`` moves only then)."""

    def request(self) -> RequestView | None:
        """What the session asks while blocked (None otherwise)."""

    def info(self, resume: ResumeOffer | None = None) -> SessionInfo: ...

    def report_token_matches(self, presented: str) -> bool: ...


def request_view(found: Request | None) -> RequestView | None:
    return None if found is None else RequestView.model_validate(found.as_dict())


class _Launched:
    """What both kinds keep of their launch: ids, names, folder, command, tokens, the handle."""

    kind: ClassVar[SessionKind]

    def __init__(self, sid: str, spec: SessionSpec, argv: list[str], host: HostKind) -> None:
        self.id = sid
        self.spec = spec
        self.argv = argv
        self.host = host
        self.name = spec.name or spec.agent or (os.path.basename(argv[0]) if argv else sid)
        self.cwd = spec.cwd or os.getcwd()
        self.created = time.time()
        self.report_token = secrets.token_urlsafe(24)
        #: a session restored from the registry knows only its token's hash (the agent has the token)
        self.token_hash: str | None = None
        #: the agent's own conversation id, as its hooks reported it: what a resume continues
        self.agent_session_id: str | None = None
        #: the argv before the hooks were added: what a resume starts again, with fresh hooks
        #: (None: a session restored from a registry that did not keep it)
        self.launched: list[str] | None = None
        self.error: str | None = None
        #: the git worktree the session was started in (its cwd), removed with the session
        self.worktree: WorktreeInfo | None = None
        self.handle: PaneHandle | None = None  # the host's (the ACP client's process, for ACP)

    def _launch_fields(self, decision: Decision, request: RequestView | None) -> dict[str, Any]:
        """The read model's fields both kinds fill alike: the launch, the decision, the handle."""
        return {
            "id": self.id, "kind": self.kind, "name": self.name, "command": self.argv, "cwd": self.cwd,
            "state": decision.state, "source": decision.source, "rule": decision.decided_by, "why": decision.why,
            "since": decision.since, "request": request, "pid": self.handle.pid if self.handle else None,
            "host": self.host, "ref": self.handle.ref if self.handle else None, "created": self.created,
            "worktree": self.worktree,
        }  # fmt: skip

    def report_token_matches(self, presented: str) -> bool:
        """Constant time; a restored session checks the kept hash."""
        if self.report_token:
            return secrets.compare_digest(presented.encode(), self.report_token.encode())
        return bool(self.token_hash) and token_matches(presented, self.token_hash or "")


class TerminalSession(_Launched):
    """An agent in a terminal: its pane (screen, signals, decision), recording, integration."""

    kind = SessionKind.terminal

    def __init__(
        self,
        sid: str,
        spec: SessionSpec,
        argv: list[str],
        host: HostKind,
        pane: Pane,
        integration: Integration | None,
    ) -> None:
        super().__init__(sid, spec, argv, host)
        self.pane = pane
        self.integration = integration
        self.transcript: Transcript | None = None  # set when recordings are on
        self.memo: dict[str, Any] = {}  # the integration's per-session scratch space

    @property
    def decision(self) -> Decision:
        return self.pane.decision

    @property
    def exit_code(self) -> int | None:
        return self.pane.exit_code

    @property
    def writable(self) -> bool:
        return self.handle is not None and self.handle.alive

    @property
    def size(self) -> tuple[int, int]:
        return self.pane.screen.rows, self.pane.screen.cols

    @property
    def seq(self) -> int:
        return self.pane.screen.seq

    def lines(self) -> list[str]:
        return self.pane.screen.lines()

    def set_decision(self, decision: Decision) -> Decision | None:
        return self.pane.set_decision(decision)

    def request(self) -> RequestView | None:
        """What the pane read with its decision: the agent's own fresh request, else the screen's."""
        return request_view(self.pane.request) if self.pane.decision.state == State.blocked else None

    def info(self, resume: ResumeOffer | None = None) -> SessionInfo:
        """The session's read model (``GET /api/sessions/{id}``, events, the dashboard's cards)."""
        pane, d = self.pane, self.pane.decision
        fg = pane.fg.program
        return SessionInfo(
            **self._launch_fields(d, self.request()),
            agent=pane.manifest_agent or pane.agent,
            launched_agent=pane.agent,
            foreground=fg.name if fg else None,
            foreground_pid=pane.fg.pgid,
            exit_code=pane.exit_code,
            error=self.error,
            rows=pane.screen.rows,
            cols=pane.screen.cols,
            title=pane.screen.title,
            bytes_read=pane.bytes_read,
            transcript=TranscriptInfo.model_validate(self.transcript.info()) if self.transcript else None,
            resume=resume,
        )


class AcpSession(_Launched):
    """An agent speaking the Agent Client Protocol: its client (through the handle), the exact
    state the protocol gives, and its conversation, which is what it shows."""

    kind = SessionKind.acp

    def __init__(
        self,
        sid: str,
        spec: SessionSpec,
        argv: list[str],
        host: HostKind,
        wall: Callable[[], float],
        program: str = "",
    ) -> None:
        super().__init__(sid, spec, argv, host)
        self._wall = wall
        starting = Decision(State.working, Source.start, "initialize: starting the agent", program=program)
        self._decision = starting.at(wall())
        self.rows, self.cols = spec.rows, spec.cols
        #: what a session with no client shows: its last screen, kept by the registry
        self.shown: list[str] = []
        self._seq = 0

    @property
    def client(self) -> AcpHandle | None:
        """The ACP client's side of the handle (None: the agent never started, or was restored)."""
        return self.handle if isinstance(self.handle, AcpHandle) else None

    @property
    def decision(self) -> Decision:
        return self._decision

    @property
    def exit_code(self) -> int | None:
        return self._decision.exit_code

    @property
    def writable(self) -> bool:
        return self.handle is not None and self.handle.alive

    @property
    def size(self) -> tuple[int, int]:
        return self.rows, self.cols

    @property
    def seq(self) -> int:
        return self._seq + (self.client.client.conversation.seq if self.client is not None else 0)

    def lines(self) -> list[str]:
        """The last screenful of the conversation, as plain text (what ``/screen`` shows)."""
        drawn = self.client.client.conversation.render(self.cols) if self.client is not None else self.shown
        rows = drawn[-self.rows :]
        return rows + [""] * (self.rows - len(rows))

    def set_decision(self, decision: Decision) -> Decision | None:
        prev = self._decision
        self._seq += 1
        if decision.state != prev.state:
            self._decision = decision.at(self._wall())
            return prev
        self._decision = decision.at(prev.since)
        return None

    def request(self) -> RequestView | None:
        """The pending permission's tool call."""
        client = self.client
        perm = client.pending() if client is not None and self._decision.state == State.blocked else None
        return None if perm is None else request_view(from_acp(perm.title, perm.tool_kind, perm.detail))

    def info(self, resume: ResumeOffer | None = None) -> SessionInfo:
        d = self._decision
        client = self.client.client if self.client is not None else None
        return SessionInfo(
            **self._launch_fields(d, self.request()),
            agent=self.spec.agent,
            launched_agent=None,
            foreground=None,
            foreground_pid=None,
            exit_code=d.exit_code,
            error=self.error or (client.error if client is not None else None),  # the agent's last fault
            rows=self.rows,
            cols=self.cols,
            title="",
            bytes_read=0,
            transcript=None,
            resume=resume,
        )


#: A session of either kind, for the parts that match on the kind.
AnySession = TerminalSession | AcpSession


def current_prompt_id(session: AnySession, decision: Decision) -> str | None:
    """The id of the prompt on the session as ``decision`` reads it (None: not blocked). An ACP
    session's prompt is its pending permission request; a terminal's, the rule that matched."""
    if decision.state != State.blocked:
        return None
    request = decision.decided_by
    if isinstance(session, AcpSession) and session.client is not None:
        pending = session.client.pending()
        request = (pending.key if pending is not None else None) or request
    return prompt_id(session.id, decision.since, request)
