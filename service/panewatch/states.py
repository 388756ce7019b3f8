"""The typed vocabulary of a pane's state: what it is, which signal said so, and since when.

One place for the words the manifests, signals, API, metrics and CLI share, so that a typo is
an error and not a state nobody handles. ``StrEnum`` members are plain strings on the wire.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from enum import StrEnum


class State(StrEnum):
    """What a pane is doing, as the user cares about it."""

    blocked = "blocked"  # waiting for the user: a prompt is open
    working = "working"  # busy; leave it alone
    idle = "idle"  # done, or waiting for a new task
    exited = "exited"  # the agent is gone; its last screen and exit code stay
    lost = "lost"  # the host lost the pane without an exit status (tmux server killed...)
    unreachable = "unreachable"  # on another node that stopped heartbeating (cluster); last state in why


class SessionKind(StrEnum):
    """How a session's state is read: from its screen (a terminal) or through the Agent Client
    Protocol (an ACP agent on stdio, which has no screen)."""

    terminal = "terminal"
    acp = "acp"


class RequestSource(StrEnum):
    """Where what a blocked agent asks (``request``) was read: its own hook payload, the ACP
    ``session/request_permission``, or the prompt on its screen (the manifest's ``[rules.request]``).
    Only the first two are structured: the approval policy never acts on the screen's alone."""

    hook = "hook"
    acp = SessionKind.acp.value
    screen = "screen"


#: States a screen rule or a report may give (the others come from the process's fate).
RULE_STATES: tuple[State, ...] = (State.blocked, State.working, State.idle)


class Source(StrEnum):
    """The signal that decided a pane's state (the order is in ``signals.py``)."""

    screen = "screen"  # a manifest rule on the visible screen (or no rule: idle)
    status = "status"  # the agent's own out-of-band status (OSC 7501)
    hook = "hook"  # a fresh report from the agent's own hooks or a plain {"state": ...}
    process = "process"  # the foreground program: the shell back, or a program a shell waits for
    exit = "exit"  # the process exited (or the host lost it)
    start = "start"  # launched, not read yet
    host = "host"  # an exact state from the host itself
    acp = SessionKind.acp.value  # an exact state from the Agent Client Protocol (ACP sessions)
    cluster = "cluster"  # the node that owns the session stopped heartbeating (its last state is in why)


@dataclass(frozen=True)
class Decision:
    """A pane's state and what decided it; exactly one of ``rule``, ``event``, ``program`` and
    ``exit_code`` names the decider (none for a screen no rule matched or a lost pane)."""

    state: State
    source: Source
    why: str
    rule: str | None = None  # the manifest rule (source screen)
    event: str | None = None  # the hook event, or "report" (source hook/host)
    program: str | None = None  # the program in the foreground (source process/start)
    exit_code: int | None = None  # the exit status (source exit)
    since: float = 0.0  # wall-clock time the pane entered this state

    @property
    def decided_by(self) -> str | None:
        """The decider as one string: the API's ``rule`` field, kept for its clients."""
        if self.rule is not None:
            return self.rule
        if self.event is not None:
            return self.event
        if self.program is not None:
            return self.program
        if self.exit_code is not None or self.state == State.exited:
            return str(self.exit_code)
        return None

    def at(self, since: float) -> Decision:
        return replace(self, since=since)

    def as_dict(self) -> dict[str, object]:
        """The fields every JSON view of a decision carries."""
        return {"state": str(self.state), "source": str(self.source), "rule": self.decided_by, "why": self.why}
