"""The pty host: each agent is the server's child on its own pseudo-terminal.

A thin adapter of :class:`panewatch.procs.ptyproc.PtyProcess` (which does the loop-driven reads,
non-blocking writes and pidfd exit) to the host protocol. Panes die with the server. With a
:class:`~panewatch.procs.proctree.Reaper` every process an agent starts is contained and killed with its
pane, and ``start`` kills what a killed server left behind. With a
:class:`~panewatch.procs.sandbox.Sandbox` each agent runs in its own (``spawn`` wraps its argv, the one
place this host does).
"""

from __future__ import annotations

import asyncio
import os
import shutil
from collections.abc import Mapping

from ..procs import ptyproc
from ..procs.proctree import Reaper
from ..procs.sandbox import Sandbox, Uncontainable
from .base import HostKind, LaunchRefused, LaunchSpec, PaneHandle, PaneSink, SpawnError, WriteRefused


def resolve_program(argv: list[str] | tuple[str, ...], env: Mapping[str, str]) -> str | None:
    """Where argv[0] would be found with the child's PATH (None if nowhere)."""
    if os.sep in argv[0]:
        return argv[0] if os.access(argv[0], os.X_OK) else None
    return shutil.which(argv[0], path=env.get("PATH"))


class PtyHandle:
    """One agent on a pty (see :class:`~panewatch.hosts.base.PaneHandle`)."""

    answers_queries = False  # the engine's emulator answers DA/DSR queries itself

    def __init__(self, proc: ptyproc.PtyProcess) -> None:
        self._proc = proc

    @property
    def pid(self) -> int | None:
        return self._proc.pid

    @property
    def agent_pid(self) -> int | None:
        return self._proc.agent_pid

    @property
    def alive(self) -> bool:
        return self._proc.alive

    @property
    def ref(self) -> str:
        return str(self._proc.pid)

    def write(self, data: bytes) -> None:
        try:
            self._proc.write(data)
        except ptyproc.WriteRefused as exc:
            raise WriteRefused(str(exc)) from None

    def resize(self, rows: int, cols: int) -> None:
        self._proc.resize(rows, cols)

    def signal(self, sig: int) -> None:
        self._proc.signal(sig)

    def foreground_pgid(self) -> int | None:
        return self._proc.foreground_pgid()

    def pause_reading(self) -> None:
        self._proc.pause_reading()

    def resume_reading(self) -> None:
        self._proc.resume_reading()

    async def terminate(self, grace: float = 2.0) -> int | None:
        """Also for an agent that exited: its contained leftovers are killed here, off the loop."""
        return await self._proc.terminate(grace)

    def close(self) -> None:
        self._proc.close()


class PtyHost:
    """Agents as children on ptys; the server's own event loop reads them."""

    kind = HostKind.pty
    survives_restart = False

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop | None = None,
        reaper: Reaper | None = None,
        sandbox: Sandbox | None = None,
    ) -> None:
        self._loop = loop
        self._reaper = reaper
        self.sandbox = sandbox

    async def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        if self.sandbox is not None:
            await self.sandbox.start()
        if self._reaper is not None:
            self._reaper.open()  # kills what a killed server's panes left running

    async def stop(self) -> None:
        """The engine terminated each pane before; the reaper kills what is still contained."""
        if self._reaper is not None:
            self._reaper.close()

    async def spawn(self, spec: LaunchSpec, sink: PaneSink) -> PaneHandle:
        if resolve_program(list(spec.argv), spec.env) is None:
            raise SpawnError(f"cannot start {spec.argv[0]!r}: not found or not executable")
        argv = list(spec.argv)
        if self.sandbox is not None:
            try:
                argv = self.sandbox.wrap(argv, spec.env)
            except Uncontainable as exc:
                raise LaunchRefused(str(exc)) from None
        try:  # fork and exec in a worker: 20 sessions starting at once do not stall the loop
            child = await asyncio.to_thread(
                ptyproc.start_child,
                argv,
                rows=spec.rows,
                cols=spec.cols,
                cwd=spec.cwd,
                env=spec.env,
                reaper=self._reaper,
                session=spec.session,
            )
        except ptyproc.SpawnError as exc:
            raise SpawnError(str(exc)) from None
        proc = ptyproc.PtyProcess(
            argv,
            on_output=sink.on_output,
            on_exit=lambda code: sink.on_exit(code, f"exited with code {code}"),
            loop=self._loop or asyncio.get_running_loop(),
            reaper=self._reaper,
            contained=self.sandbox is not None and self.sandbox.active,
            child=child,
        )
        return PtyHandle(proc)

    async def adopt(self, ref: str, session: str, sink: PaneSink) -> PaneHandle | None:
        return None  # a pty dies with the server that opened it

    async def remove_orphans(self, keep: set[str]) -> list[str]:
        return []  # the reaper ended what a killed server left (``start``)
