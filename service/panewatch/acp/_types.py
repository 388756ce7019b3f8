"""What an ACP session is made of besides its client: its errors, phases, listener and child
process protocols, timeouts, and the small readers of what the agent sent."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from typing import Protocol

from pydantic import ValidationError

from ..states import State
from . import protocol as p

#: Protocol faults (not counting stdout noise) after which the agent is ended: it is not
#: speaking ACP, and answering each fault would be all the session does.
MAX_FAULTS = 50
#: How long an agent that closed its stdout has to exit before it is ended.
EOF_GRACE = 1.0
#: ACP's error code for "authentication required".
AUTH_REQUIRED = -32000


class AcpError(Exception):
    """Base of what the client refuses; ``status`` is the HTTP status the API answers with."""

    status = 409


class Busy(AcpError):
    """A prompt while a turn runs or a permission is pending, or before the agent is ready."""


class Withdrawn(AcpError):
    """An answer to a permission request that is no longer pending."""


class NotOffered(AcpError):
    """An answer naming an option the request did not offer."""

    status = 422


class Gone(AcpError):
    """The agent has exited."""


class Phase(StrEnum):
    """Where the session is in its life (the state says what the user cares about)."""

    starting = "starting"  # initialize / session/new not answered yet
    ready = "ready"  # waiting for a prompt
    turn = "turn"  # a prompt turn runs
    exited = "exited"


class Listener(Protocol):
    """Who hears about the session (the ACP host, which tells the engine). Loop only."""

    def on_state(self, state: State, why: str, event: str) -> None:
        """The exact state now; ``event`` names the protocol message that decided it."""

    def on_change(self) -> None:
        """The conversation changed (render it again)."""

    def on_exit(self, code: int | None, reason: str) -> None: ...


class Child(Protocol):
    """The agent's process as the client uses it (``StdioChild``; tests may bring their own)."""

    pid: int

    @property
    def alive(self) -> bool: ...

    def write(self, data: bytes) -> None: ...

    def stderr_text(self, max_chars: int = 2000) -> str: ...

    async def terminate(self, grace: float = 2.0) -> int | None: ...

    def close(self) -> None: ...


ChildFactory = Callable[..., Child]


@dataclass(frozen=True)
class Timeouts:
    initialize: float = 30.0
    new_session: float = 60.0
    #: after ``session/cancel``, how long the agent has to end the turn before the client ends
    #: it on its own (the turn is then idle with that reason, never stuck working)
    cancel: float = 15.0


DEFAULT_TIMEOUTS = Timeouts()


def tool_detail(tool: p.ToolCallRef) -> str:
    """A line that says what the tool would do (its command, its file), for the prompt."""
    raw = tool.raw_input
    if isinstance(raw, dict):
        for key in ("command", "file_path", "path", "url", "pattern"):
            value = raw.get(key)
            if isinstance(value, str) and value:
                return value[:500]
    if tool.content:
        texts = [p.text_of(c) for c in tool.content]
        return " ".join(t for t in texts if t)[:500]
    return ""


def short_error(exc: BaseException) -> str:
    if isinstance(exc, ValidationError):
        errs = exc.errors()
        if not errs:
            return "value: invalid"
        first = errs[0]
        loc = ".".join(str(x) for x in first["loc"])
        return f"{loc or 'value'}: {first['msg']}" + (f" (+{len(errs) - 1} more)" if len(errs) > 1 else "")
    return str(exc)[:300]


def panewatch_version() -> str:
    from .. import __version__

    return __version__
