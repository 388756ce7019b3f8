"""The pane-host seam: what every way of hosting an agent must offer the engine.

Four kinds are planned against this one protocol:

- ``pty``    : the agent is the server's child on a pseudo-terminal (dies with the server;
               the next start cleans up what a killed server left behind);
- ``tmux``   : the agent lives in a private tmux server and outlives Panewatch; a new server
               *adopts* its panes (``PaneHost.adopt``) with the same ids;
- ``memory`` : bytes scripted by a test, with an injected clock: no process at all;
- ``acp``    : an agent speaking the Agent Client Protocol over stdio. It has no screen to
               read, so instead of bytes it calls ``PaneSink.on_status`` with the exact state
               the protocol gives, and ``on_change`` when its conversation moves.

Panes on *other machines* are not a host: the owning node runs the whole pipeline (screen,
rules, guards) and the cluster layer forwards façade calls to it, so guards are applied once,
where the agent is. See ``docs/architecture.md``.

Hosts call back into the engine only through :class:`PaneSink`, always on the event loop.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Protocol, runtime_checkable

from ..states import SessionKind, State


class HostKind(StrEnum):
    """The ways of hosting an agent (the module docstring says what each is)."""

    pty = "pty"
    tmux = "tmux"
    memory = "memory"
    acp = SessionKind.acp.value  # an agent speaking the Agent Client Protocol on stdio


class HostError(Exception):
    """Base of what a host raises; the engine maps each subclass to one domain error."""


class SpawnError(HostError):
    """The command could not be started (not found, not executable, bad folder, bad env)."""


class LaunchRefused(SpawnError):
    """The host will not start this command as given (the request is at fault, not the machine):
    e.g. a user switch whose command is one shell string, which no sandbox can go inside."""


class WriteRefused(HostError):
    """The agent is not reading its input (or is gone): the bytes were not queued."""


@dataclass(frozen=True)
class LaunchSpec:
    """Everything a host needs to start one agent; already validated and encoded by the engine."""

    session: str  # the engine's session id (hosts use it to name windows, cgroups, ...)
    argv: Sequence[str]
    cwd: str
    env: Mapping[str, str]
    rows: int
    cols: int
    extra: Mapping[str, str] = field(default_factory=dict)  # host-specific options


class PaneSink(Protocol):
    """The engine side of a pane, as a host sees it. Called on the event loop only."""

    def on_output(self, data: bytes) -> None:
        """Bytes the agent wrote to its terminal, in order."""

    def on_exit(self, code: int | None, reason: str) -> None:
        """The agent is gone: ``code`` is its exit status (negative: killed by that signal),
        None when the host lost it without a status (tmux server killed, machine rebooted)."""

    def on_status(self, state: State, why: str, event: str) -> None:
        """An exact state from the host itself (ACP: a pending permission, the end of a turn),
        ``event`` the protocol message that decided it; byte hosts never call it."""

    def on_change(self) -> None:
        """What the agent shows changed without any output (ACP: its conversation): whoever
        watches the session reads it again. Byte hosts never call it."""


@runtime_checkable
class PaneHandle(Protocol):
    """One hosted agent. Methods never block the loop; errors are ``HostError`` subclasses."""

    @property
    def pid(self) -> int | None:
        """The agent's process id on this machine, when there is one."""

    @property
    def agent_pid(self) -> int | None:
        """The launched command's own process: ``pid`` itself, or inside a sandbox the agent (not
        bwrap); None until it exists. Its coming back to the foreground means "the shell is back"."""

    @property
    def alive(self) -> bool: ...

    @property
    def ref(self) -> str:
        """A host-specific, persistable address of the pane (tmux: ``%12``; pty: the pid),
        stored in the registry so a later server can adopt or clean it up."""

    @property
    def answers_queries(self) -> bool:
        """True when the host answers terminal queries (DA, DSR, kitty keyboard) itself, as tmux
        does; False when the engine's emulator must write the answers back."""

    def write(self, data: bytes) -> None:
        """Queue exact bytes for the agent's input; raises ``WriteRefused`` when it is not
        reading (too much already queued) or has exited."""

    def resize(self, rows: int, cols: int) -> None:
        """Set the terminal size (the agent gets SIGWINCH)."""

    def signal(self, sig: int) -> None:
        """Deliver a signal to the agent's process group and the terminal's foreground group."""

    def foreground_pgid(self) -> int | None:
        """The terminal's foreground process group, or None when the host cannot tell."""

    def pause_reading(self) -> None:
        """Stop delivering output (backpressure: the agent blocks once buffers fill)."""

    def resume_reading(self) -> None: ...

    async def terminate(self, grace: float = 2.0) -> int | None:
        """End the agent and *every* process it started; returns its exit status."""

    def close(self) -> None:
        """Release the host's resources for this pane (after ``terminate`` or exit)."""


@runtime_checkable
class PaneHost(Protocol):
    """One kind of pane hosting, shared by all of a server's sessions of that kind."""

    kind: HostKind
    survives_restart: bool  # True: panes outlive the server and are adopted by the next one

    async def start(self) -> None:
        """Get ready (start a control client, clean up what a killed server left...)."""

    async def stop(self) -> None:
        """Shut down; hosts whose panes survive a restart leave the agents running."""

    async def spawn(self, spec: LaunchSpec, sink: PaneSink) -> PaneHandle:
        """Start an agent; raises ``SpawnError`` and leaves nothing behind when it cannot. Never
        blocks the event loop (a host that runs a program to start one runs it in a thread)."""

    async def adopt(self, ref: str, session: str, sink: PaneSink) -> PaneHandle | None:
        """Take over a pane a previous server started (None: it is gone). The sink first gets
        the pane's current screen as bytes, then the live stream. Hosts whose panes die with
        the server return None."""

    async def remove_orphans(self, keep: set[str]) -> list[str]:
        """End the panes a previous server left that are not sessions in ``keep`` (a server
        killed while starting one); their session ids. Hosts whose panes die with it have none."""
