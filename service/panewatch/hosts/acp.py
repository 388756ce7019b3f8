"""The ACP pane host: agents that speak the Agent Client Protocol over stdio.

Such an agent has no terminal and writes no bytes to show. Its state comes from the protocol
(``PaneSink.on_status`` with the exact state, the protocol detail as the why and the message
that decided it as the event); a change of its conversation is ``on_change``, and the engine
serves the conversation as it is (the engine's ACP session draws it as text for screen clients).
Input is structured: prompts, answers naming an ``optionId``, cancel; raw bytes are refused
(``write``), because keystrokes mean nothing to an ACP agent.
"""

from __future__ import annotations

import asyncio
import signal as signals
from typing import Any

from ..acp import AcpClient, AcpError, Timeouts
from ..acp.conversation import PendingPermission
from ..acp.stdio import StdioSpawnError
from ..states import State
from .base import HostKind, LaunchSpec, PaneSink, SpawnError, WriteRefused


class AcpHandle:
    """One ACP agent as the engine sees it: a PaneHandle plus prompt/answer/cancel."""

    def __init__(self, spec: LaunchSpec, sink: PaneSink, timeouts: Timeouts, host: AcpHost | None = None) -> None:
        self._sink = sink
        self._host = host
        try:
            self.client = AcpClient(spec.argv, cwd=spec.cwd, env=spec.env, listener=self, timeouts=timeouts)
        except StdioSpawnError as exc:
            raise SpawnError(str(exc)) from None

    # -- Listener (from the client) -----------------------------------------------------
    def on_state(self, state: State, why: str, event: str) -> None:
        self._sink.on_status(state, why, event)

    def on_change(self) -> None:
        self._sink.on_change()

    def on_exit(self, code: int | None, reason: str) -> None:
        self._sink.on_exit(code, reason)

    # -- structured input ----------------------------------------------------------------
    def prompt(self, text: str) -> None:
        self.client.prompt(text)

    def answer(self, option_id: str, request: str | None = None) -> tuple[PendingPermission, dict[str, str]]:
        return self.client.answer(option_id, request)

    def cancel(self) -> None:
        self.client.cancel()

    def pending(self) -> PendingPermission | None:
        return self.client.pending()

    def conversation(self) -> dict[str, Any]:
        return {
            **self.client.conversation.as_dict(),
            **self.client.info(),
            "state": self.client.state,
            "why": self.client.why,
        }

    @property
    def error(self) -> str | None:
        """The agent's last protocol fault or failure (shown as the session's ``error``)."""
        return self.client.error

    # -- PaneHandle -----------------------------------------------------------------------
    @property
    def pid(self) -> int | None:
        return self.client.pid

    @property
    def agent_pid(self) -> int | None:
        return self.pid  # no sandbox in between

    @property
    def alive(self) -> bool:
        return self.client.alive

    @property
    def ref(self) -> str:
        return str(self.client.pid)

    @property
    def answers_queries(self) -> bool:
        return True  # nothing reads terminal queries here: never write answers into the protocol

    def write(self, data: bytes) -> None:
        raise WriteRefused(
            "an ACP agent takes prompts, answers and cancel, not keystrokes "
            "(use /send, /answer with an option id, /cancel)"
        )

    def resize(self, rows: int, cols: int) -> None:
        """Nothing to tell the agent: the conversation is drawn at the session's size."""

    def signal(self, sig: int) -> None:
        if sig == signals.SIGINT and self.client.alive:
            try:
                self.client.cancel()  # Ctrl-C means "stop this turn", as in a terminal
                return
            except AcpError:
                pass
        self.client.child.signal(sig)  # type: ignore[attr-defined]

    def foreground_pgid(self) -> int | None:
        return None

    def pause_reading(self) -> None:
        """Never paused: protocol messages must keep flowing (the conversation is bounded)."""

    def resume_reading(self) -> None:
        pass

    async def terminate(self, grace: float = 2.0) -> int | None:
        return await self.client.terminate(grace)

    def close(self) -> None:
        self.client.close()
        if self._host is not None:
            self._host.handles.discard(self)


class AcpHost:
    """Hosts ACP agents as children on pipes; they die with the server (nothing to adopt)."""

    kind = HostKind.acp
    survives_restart = False

    def __init__(self, timeouts: Timeouts | None = None) -> None:
        self.timeouts = timeouts or Timeouts()
        self.handles: set[AcpHandle] = set()

    async def start(self) -> None:
        pass

    async def stop(self) -> None:
        await asyncio.gather(*(h.terminate(1.0) for h in list(self.handles) if h.alive), return_exceptions=True)
        for h in list(self.handles):
            h.close()
        self.handles.clear()

    async def spawn(self, spec: LaunchSpec, sink: PaneSink) -> AcpHandle:
        timeouts = self.timeouts
        if "init_timeout" in spec.extra:
            timeouts = Timeouts(
                initialize=float(spec.extra["init_timeout"]), new_session=timeouts.new_session, cancel=timeouts.cancel
            )
        handle = AcpHandle(spec, sink, timeouts, self)
        self.handles.add(handle)
        return handle

    async def adopt(self, ref: str, session: str, sink: PaneSink) -> AcpHandle | None:
        return None

    async def remove_orphans(self, keep: set[str]) -> list[str]:
        return []  # its agents die with the server
