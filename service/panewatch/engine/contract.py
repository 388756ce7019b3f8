"""The one contract between the API and an engine: ``EngineAPI``, all async, typed.

The local engine (``Engine``) and the cluster's (``cluster.federation.ClusterEngine``) both
implement it, so a route awaits the same call whether the session runs here or on another node
and mypy checks both against it. A capability one of them lacks is still a method here: it
raises a domain error that says why (the local engine's ``create`` on another node is an
``InvalidRequest``). Every write names its ``Actor``.

A page's terminal (``terminal``) is a channel, not a call: a ``TerminalChannel`` carries the
pane's output out and the page's keys in, as terminado's terminal manager does for a socket.

``local`` is this node's own engine (the local engine: itself), for what listens to this
node's events in-process (the ledger, Web Push, /metrics) and its approval policy.

Reports are the exception, and a separate protocol (``ReportDesk``): an agent's hooks report to
the node that runs it, through the report socket's handler, which answers in one loop turn, and
the HTTP door decides from a request's head alone whether a report token is right.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Mapping
from pathlib import Path
from typing import Any, Protocol

from ..panes.signals import Report
from ..policy import PolicyStore
from ..sinks.notify import Notifier
from ..states import State
from ..worktrees import Changes
from .events import EventStream, Listener
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

__all__ = ["EngineAPI", "NodeEngine", "ReportDesk", "TerminalChannel"]


class ReportDesk(Protocol):
    """Where an agent's hook reports land: always the node that runs the agent."""

    def agent_roots(self) -> dict[int, str]:
        """``{pid: session id}`` of every running agent: a report's caller belongs to the session
        whose agent is that process or one of its ancestors."""

    async def launches(self) -> None:
        """Returns once every launch under way now has its agent's process known: until then a
        starting pane's report has no session to land on (a host may say which process it
        started only after the agent ran, as tmux does)."""

    def report_token(self, sid: str) -> str:
        """The session's token for reports over TCP (``UnknownSession`` if it is not here)."""

    def report(self, sid: str, payload: dict[str, Any]) -> Report | None:
        """A hook payload or ``{"state": ...}`` applied at once; None: not used for state."""

    def state_of(self, sid: str) -> State:
        """The session's state now (what a report's answer says it is after the report)."""


class TerminalChannel(Protocol):
    """One page's terminal on one session (the dashboard's xterm.js widget): out, the pane's
    recent output, a repaint of its screen, then live output as bytes, with JSON messages
    (dicts: ``hello``, ``ready``, ``size``, ``state``); in, the page's messages (``input``,
    ``release``, ``resize``), each answered (``held``, ``released``, ``error``) or not."""

    def messages(self) -> AsyncIterator[bytes | dict[str, Any]]:
        """What goes to the page, until the session is deleted (then ``UnknownSession``)."""

    async def input(self, message: Mapping[str, Any]) -> dict[str, Any] | None:
        """One message from the page; the reply, if any (a refusal says why in an ``error``)."""

    def close(self) -> None:
        """The page went away (keys it held back are dropped)."""


class NodeEngine(Protocol):
    """This node's own engine, in-process: its events as they happen, its policy, its notifier."""

    @property
    def policy(self) -> PolicyStore: ...

    @property
    def notifier(self) -> Notifier: ...

    def subscribe(self, listener: Listener) -> Callable[[], None]:
        """Every typed event, synchronously, output bytes included; returns the unsubscriber."""

    def prompt_now(self, sid: str) -> Prompt | None:
        """``prompt`` within one loop turn (from inside the event that made the session blocked)."""


class EngineAPI(Protocol):
    """Sessions: created, read, written and deleted; their screens, events and streams."""

    @property
    def reports(self) -> ReportDesk:
        """This node's report desk."""

    @property
    def local(self) -> NodeEngine:
        """This node's own engine (the local engine: itself)."""

    # -- lifecycle ------------------------------------------------------------------------------
    async def prepare(self) -> None:
        """What must work before the server listens (the cluster: joining it; else nothing)."""

    async def start(self) -> None: ...

    async def stop(self) -> None: ...

    async def reachable_at(self, url: str | None = None, env: Mapping[str, str] | None = None) -> None:
        """How new agents reach this server: its URL, and variables every agent gets (the
        report socket's path and URL)."""

    # -- reads ----------------------------------------------------------------------------------
    async def list(self) -> list[SessionInfo]: ...

    async def count(self) -> int: ...

    async def get(self, sid: str) -> SessionInfo: ...

    async def screen(self, sid: str, *, styles: bool = False) -> ScreenView:
        """The visible screen, read fresh, with the state and the prompt's options."""

    async def prompt(self, sid: str) -> Prompt | None:
        """The prompt on a blocked session (kind, options, its id), as last read; None otherwise."""

    async def explain(self, sid: str) -> Explanation:
        """Why the session is in its state: every rule against the screen, the other signals."""

    async def conversation(self, sid: str) -> ConversationView:
        """An ACP session's conversation; ``InvalidRequest`` for a terminal."""

    async def agents(self) -> AgentList: ...

    async def transcript(self, sid: str) -> tuple[Path, int] | None:
        """The session's recording file and its size (None: not recorded here)."""

    async def stats(self) -> EngineStats: ...

    # -- writes ---------------------------------------------------------------------------------
    async def create(self, spec: SessionSpec, *, actor: Actor, node: str | None = None) -> SessionInfo:
        """Launch a session (on ``node``, in a cluster). A command that cannot start still gives
        a session, ``exited`` with the error."""

    async def delete(self, sid: str, *, actor: Actor, discard: bool = False) -> Deletion:
        """End and forget the session; a worktree session's worktree is removed only when clean,
        or when ``discard`` confirms losing its changes (else ``WorktreeDirty``, 409, nothing ended)."""

    async def changes(self, sid: str) -> Changes:
        """What a worktree session's branch changed against its base, uncommitted work included."""

    async def resume(self, sid: str, *, actor: Actor) -> SessionInfo:
        """Start a lost session's agent again on its own conversation."""

    async def rename(self, sid: str, name: str, *, actor: Actor) -> SessionInfo:
        """A new name (cleaned; kept in the registry); ``InvalidRequest`` if nothing visible is left."""

    async def resize(self, sid: str, rows: int, cols: int, *, actor: Actor) -> SessionInfo: ...

    async def send(self, sid: str, text: str, *, actor: Actor, enter: bool = True) -> Sent:
        """Type ``text`` (and Enter): refused while the pane is blocked."""

    async def answer(
        self,
        sid: str,
        *,
        actor: Actor,
        option: int | str | None = None,
        keys: str | None = None,
        request: str | None = None,
        prompt_id: str | None = None,
    ) -> AnswerResult:
        """Answer a prompt: only when blocked now; then check that the prompt went away.
        ``prompt_id`` (a screen's ``prompt.id``, a notification's): only that same prompt, else
        ``PromptGone`` (409), checked where the pane is, right before writing."""

    async def cancel(self, sid: str, *, actor: Actor) -> Cancelled:
        """Interrupt an ACP session's turn; ``InvalidRequest`` for a terminal."""

    async def write_keys(self, sid: str, data: bytes, *, actor: Actor) -> None:
        """Keystrokes a person typed into a terminal they see (not guarded, but logged)."""

    # -- streams --------------------------------------------------------------------------------
    async def terminal(self, sid: str, *, actor: Actor) -> TerminalChannel:
        """A page's terminal on the session (another node's: watched, read-only)."""

    async def events(self, *, size: int = 1000, heartbeat: float | None = 15.0) -> EventStream:
        """State-level events: a snapshot, then each event; ``close()`` it when done."""

    async def screens(self, sid: str, *, interval: float = 0.1, styles: bool = False) -> AsyncIterator[ScreenFrame]:
        """Screen frames, latest only, at most one per ``interval``; ``UnknownSession`` at once."""

    async def conversations(self, sid: str, *, interval: float = 0.1) -> AsyncIterator[ConversationView]:
        """An ACP session's conversation on every change, latest only."""
