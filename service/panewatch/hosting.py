"""Choosing where agents run and opening the state folder, before the server listens.

Everything that can make ``serve`` unusable here (no tmux when it was asked for, a state folder
or socket of someone else, a damaged registry) is found now and said in one line, exit code 2,
instead of as a traceback from inside the server's start-up.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

from .config import default_state_dir
from .hosts.base import PaneHost
from .hosts.tmux import TmuxError, TmuxHost, tmux_usable
from .registry import Registry, RegistryError
from .statedir import StateDirError, load_or_create_token, prepare_state_dir

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


def choose_host(pane_host: str | None, state_dir: Path) -> tuple[PaneHost, str | None]:
    """tmux when asked for or usable, else the pty host with a note saying what that costs. The pty
    host's reaper keeps its containments in the state folder, so the next start cleans up after a
    killed server (tmux instead keeps its agents for the next start to adopt)."""
    from .hosts.pty import PtyHost
    from .proctree import Reaper

    if pane_host == "pty":
        return PtyHost(reaper=Reaper(state_dir)), None
    reason = tmux_usable()
    if pane_host == "tmux":
        if reason:
            raise StartupError(f"--pane-host tmux: {reason}")
        return TmuxHost(state_dir), None
    if reason:
        return PtyHost(reaper=Reaper(state_dir)), (
            f"agents run on the pty host and will not survive a restart of the server "
            f"({reason}; install tmux 3.2+ or pass --pane-host pty to silence this)"
        )
    return TmuxHost(state_dir), None


def open_hosting(*, state_dir: Path | None, pane_host: str | None, token: str | None) -> Hosting:
    """The state folder, the host, the registry and the API token, or a ``StartupError``."""
    folder = Path(state_dir) if state_dir else default_state_dir()
    try:
        prepare_state_dir(folder)
        host, note = choose_host(pane_host, folder)
        if isinstance(host, TmuxHost):
            host.check_ready()
        registry = Registry.in_state_dir(folder)
        kept = None if token else load_or_create_token(folder)
    except (StateDirError, TmuxError, RegistryError) as exc:
        raise StartupError(str(exc)) from None
    return Hosting(folder, host, registry, kept, note)
