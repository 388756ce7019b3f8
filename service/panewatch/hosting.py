"""Choosing where agents run and opening the state folder, before the server listens.

Everything that can make ``serve`` unusable here (no tmux when it was asked for, a state folder
or socket of someone else, a damaged registry) is found now and said in one line, exit code 2,
instead of as a traceback from inside the server's start-up.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from .access.statedir import (
    OPEN_MODE,
    PRIVATE_MODE,
    StateDirError,
    check_reachable,
    load_or_create_token,
    prepare_state_dir,
    secure_contents,
)
from .access.statelock import StateLock, StateLockError, lock_state_dir
from .config import Settings, default_state_dir
from .hosts.base import PaneHost
from .hosts.tmux import TmuxError, TmuxHost, tmux_usable
from .procs.sandbox import Sandbox, sandbox_for
from .registry import Registry, RegistryError

log = logging.getLogger("panewatch")


class StartupError(Exception):
    """``serve`` cannot start as configured; the message is the one line to print."""


@dataclass
class Hosting:
    state_dir: Path
    host: PaneHost
    registry: Registry
    token: str | None  # kept in the state folder, when none was given
    note: str | None  # said once in the log (e.g. why agents will not survive a restart)
    lock: StateLock | None = None  # this server's hold on the folder, for the process's life


def choose_host(pane_host: str | None, state_dir: Path, sandbox: Sandbox | None = None) -> tuple[PaneHost, str | None]:
    """tmux when asked for or usable, else the pty host with a note saying what that costs. The pty
    host's reaper keeps its containments in the state folder, so the next start cleans up after a
    killed server (tmux instead keeps its agents for the next start to adopt). Either host runs
    each agent in ``sandbox``."""
    from .hosts.pty import PtyHost
    from .procs.proctree import Reaper

    if pane_host == "pty":
        return PtyHost(reaper=Reaper(state_dir), sandbox=sandbox), None
    reason = tmux_usable()
    if pane_host == "tmux":
        if reason:
            raise StartupError(f"--pane-host tmux: {reason}")
        return TmuxHost(state_dir, sandbox=sandbox), None
    if reason:
        return PtyHost(reaper=Reaper(state_dir), sandbox=sandbox), (
            f"agents run on the pty host and will not survive a restart of the server "
            f"({reason}; install tmux 3.2+ or pass --pane-host pty to silence this)"
        )
    return TmuxHost(state_dir, sandbox=sandbox), None


def open_hosting(
    *,
    state_dir: Path | None,
    pane_host: str | None,
    token: str | None,
    settings: Settings | None = None,
    agent_users: Sequence[str] = (),
) -> Hosting:
    """The state folder, the host, the registry and the API token, or a ``StartupError``. The
    host contains its agents as ``settings`` ask (``contain``; not at all without settings). With
    ``agent_users`` the folder is opened for them to pass through to the report socket (0711)
    and checked to be reachable by each; either way everything in it is made private first."""
    folder = Path(state_dir) if state_dir else default_state_dir()
    lock: StateLock | None = None
    try:
        check_reachable(folder, agent_users)
        prepare_state_dir(folder, OPEN_MODE if agent_users else PRIVATE_MODE)
        # before the host, the registry or the reaper look at what is in the folder
        lock = lock_state_dir(folder)
        secure_contents(folder)
        host, note = choose_host(pane_host, folder, sandbox_for(settings, folder) if settings else None)
        if isinstance(host, TmuxHost):
            host.check_ready()
        registry = Registry.in_state_dir(folder)
        kept = None if token else load_or_create_token(folder)
    except (StateDirError, StateLockError, TmuxError, RegistryError) as exc:
        if lock is not None:
            lock.release()
        raise StartupError(str(exc)) from None
    return Hosting(folder, host, registry, kept, note, lock)
