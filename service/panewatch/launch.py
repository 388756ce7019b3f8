"""How the engine launches and adopts a session: the command to run, and a fresh pane.

Private to the engine (``engine.py`` keeps the façade, this keeps the steps): the command
comes from the request or the agent's manifest and is checked before any session exists, so
a refused launch leaves nothing behind.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from typing import TYPE_CHECKING

from . import acp_sessions
from .backends import make_screen
from .errors import InvalidRequest
from .hosts.base import PaneHost
from .integrations import integration
from .manifest import CompiledManifest, ManifestStore
from .pane import Pane
from .ptyproc import unencodable
from .session import Session, SessionSpec, expand_command
from .states import Decision, Source, State

if TYPE_CHECKING:
    from .engine import Engine

log = logging.getLogger("panewatch.engine")


SIZE_LIMITS = "rows must be 2..500 and cols 10..1000"


def check_size(rows: int, cols: int) -> None:
    if not (2 <= rows <= 500 and 10 <= cols <= 1000):
        raise InvalidRequest(SIZE_LIMITS)


def hosts_of(host: PaneHost | None, hosts: Mapping[str, PaneHost] | None) -> tuple[dict[str, PaneHost], PaneHost]:
    """Every host by kind and the default one: ``hosts`` (the first is the default), else
    ``host``, else the pty host; the ACP host is always there (ACP agents need no setup)."""
    if hosts is None:
        if host is None:
            from .hosts.pty import PtyHost

            host = PtyHost()
        hosts = {host.kind: host}
    found: dict[str, PaneHost] = dict(hosts)
    if acp_sessions.KIND not in found:
        from .hosts.acp import AcpHost

        found[acp_sessions.KIND] = AcpHost()
    return found, host if host is not None else next(iter(found.values()))


def command_of(store: ManifestStore, spec: SessionSpec) -> tuple[list[str], CompiledManifest | None]:
    """The argv to start and the agent's manifest; InvalidRequest for what cannot be launched."""
    acp = spec.host == acp_sessions.KIND
    manifest = store.get(spec.agent) if spec.agent and not acp else None
    if spec.agent and manifest is None and not acp:
        raise InvalidRequest(f"unknown agent {spec.agent!r} (known: {', '.join(store.agents())})")
    if acp:
        argv = acp_sessions.launch_argv(spec)  # ACP agents have no screen rules: no manifest
    elif spec.command:
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


def new_pane(engine: Engine, sid: str, spec: SessionSpec, *, acp: bool = False, program: str = "") -> Pane:
    """A pane on the engine's screen backend; an ACP pane's state comes from the protocol only."""
    panes = engine.panes
    pane = Pane(
        make_screen(engine.backend, spec.rows, spec.cols, reply=lambda data: panes.reply(sid, data)),
        agent=None if acp else spec.agent,
        clock=panes.clock.time,
        wall=engine.wall,
    )
    if acp:
        pane.set_exact(Decision(State.working, Source.start, "initialize: starting the agent", program=program))
    return pane


async def adopt(
    engine: Engine,
    host: PaneHost,
    ref: str,
    spec: SessionSpec,
    *,
    sid: str,
    argv: list[str],
    report_token: str | None = None,
) -> Session | None:
    """The session of a pane a previous server left on ``host``, attached (None: it is gone)."""
    panes = engine.panes
    if sid in panes.sessions:
        raise InvalidRequest(f"session {sid!r} exists already")
    chosen = integration(manifest.manifest.hooks) if (manifest := engine.store.get(spec.agent or "")) else None
    session = Session(sid, spec, list(argv), new_pane(engine, sid, spec), chosen, host.kind)
    if report_token:
        session.report_token = report_token
    panes.add(session)
    handle = await host.adopt(ref, sid, panes.sink(session))
    if handle is None:
        await panes.remove(session)
        return None
    session.handle = handle
    log.info("adopted %s from %s (%s)", argv[0] if argv else "?", host.kind, ref, extra={"session": sid})
    return session
