"""What agents must never learn: the API token, and the server's own settings.

An agent runs as the user who started Panewatch, so it can read every ``/proc/<pid>/cmdline`` and
``/proc/<pid>/environ`` of that user — the server's included. A token given with ``--token`` or
``PANEWATCH_TOKEN`` is therefore readable by every agent (and then ``POST /answer`` approves the
agent's own prompts); the server says so in a warning. ``--token-file`` and the generated token
never appear there. Agents inherit no ``PANEWATCH_*`` variable of the server (the config path,
the webhook...): only the few the session sets for them (``session.agent_env``).
"""

from __future__ import annotations

import logging
import os
import stat
import tempfile
from pathlib import Path

from ..config import Settings, default_state_dir
from .auth import new_token

log = logging.getLogger("panewatch.access.identity")


class TokenError(ValueError):
    """The token file cannot be used (missing, empty, too short)."""


def read_token_file(path: os.PathLike[str] | str) -> str:
    """The first line of ``path``; warns when the file is readable by other users."""
    try:
        mode = os.stat(path).st_mode
        with open(path, encoding="utf-8") as f:
            token = f.readline().strip()
    except (OSError, UnicodeDecodeError) as exc:
        raise TokenError(f"token file {path}: {exc}") from None
    if len(token) < 8:
        raise TokenError(f"token file {path}: the first line must hold a token of at least 8 characters")
    if mode & (stat.S_IRWXG | stat.S_IRWXO):
        log.warning("token file %s is readable by other users: chmod 600 it", path)
    return token


def resolve_token(settings: Settings) -> tuple[Settings, str]:
    """Settings with ``token`` set, and where it came from: "file", "given" or "generated"."""
    if settings.token_file is not None:
        if settings.token:
            log.warning("both a token and a token file were given: the token file wins")
        return settings.model_copy(update={"token": read_token_file(settings.token_file)}), "file"
    if settings.token:
        log.warning(
            "the API token was given by --token or PANEWATCH_TOKEN: every agent running as this user "
            "can read it (--token from /proc/<pid>/cmdline, PANEWATCH_TOKEN from the environ of whatever "
            "started the server: a shell, tini) and answer its own prompts; use --token-file (or let the server "
            "generate one)"
        )
        return settings, "given"
    return settings.model_copy(update={"token": new_token()}), "generated"


def state_dir(settings: Settings) -> Path:
    """The state folder, made on first use: 0700, as ``statedir.prepare_state_dir`` keeps it (it
    holds the tmux socket, the registry and the kept token); agents of this user reach the report
    socket by its name, and their ancestry, not the folder, decides what they may report."""
    path = settings.state_dir or default_state_dir()
    try:
        path.mkdir(parents=True, exist_ok=True, mode=0o700)
    except OSError as exc:
        if settings.state_dir is not None:
            raise
        fallback = Path(tempfile.mkdtemp(prefix="panewatch-state-"))
        os.chmod(fallback, 0o700)
        log.warning(
            "cannot use %s (%s): state in %s, so a killed server's leftovers are not cleaned up "
            "by the next start; set --state-dir",
            path,
            exc.strerror,
            fallback,
        )
        return fallback
    return path


def protect_process() -> bool:
    """Make the server non-dumpable: its ``/proc/<pid>/environ`` and memory become unreadable (and
    unptraceable) by other processes of the same user — the token in memory, or in
    ``PANEWATCH_TOKEN``, included. (``cmdline`` stays readable: never put the token there.)
    Children get the normal setting back when they exec. False where prctl is unavailable."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        PR_SET_DUMPABLE = 4
        result: int = libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)
        return result == 0
    except (OSError, AttributeError):
        return False
